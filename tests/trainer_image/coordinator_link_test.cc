// The trainer's end of the Session stream against a scripted coordinator on loopback (real
// gRPC): which refusals it waits out, and that the Hello is the first message of every stream.
#include "trainer_image/trainer/membership/coordinator_link.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>
#include <vector>

#include "operator/coordinator/tls_certificates.h"
#include "tests/support/freezable_proxy.h"

namespace fulcrum::trainer {
namespace {

using namespace std::chrono_literals;

// fulcrum-trainer ignores SIGPIPE (main.cc) so that a write to a peer that went away fails
// instead of killing it; this process runs the same link (and a proxy that cuts connections).
const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();
using fulcrum::testing::FreezableProxy;
using fulcrum::v1::CoordinatorMessage;
using fulcrum::v1::TrainerMessage;

// Refuses the first sessions with the given codes, then assigns generation 1 and listens.
class ScriptedCoordinator final : public fulcrum::v1::Coordinator::Service {
 public:
  explicit ScriptedCoordinator(std::vector<grpc::StatusCode> refusals)
      : refusals_(std::move(refusals)) {}

  grpc::Status Session(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<CoordinatorMessage, TrainerMessage>* stream) override {
    TrainerMessage first;
    if (!stream->Read(&first)) return grpc::Status::OK;
    std::size_t session;
    {
      std::lock_guard lock(mutex_);
      session = first_messages_.size();
      first_messages_.push_back(first);
    }
    if (session < refusals_.size()) return grpc::Status(refusals_[session], "scripted refusal");
    CoordinatorMessage message;
    fulcrum::v1::Assignment& assignment = *message.mutable_assignment();
    assignment.set_generation(1);
    assignment.set_world_size(1);
    assignment.set_local_batch(8);
    assignment.set_global_batch(8);
    assignment.add_batches(8);
    stream->Write(message);
    for (TrainerMessage ignored; stream->Read(&ignored);) {
    }
    return grpc::Status::OK;
  }

  std::vector<TrainerMessage> first_messages() {
    std::lock_guard lock(mutex_);
    return first_messages_;
  }

 private:
  const std::vector<grpc::StatusCode> refusals_;
  std::mutex mutex_;
  std::vector<TrainerMessage> first_messages_;
};

class CoordinatorLinkTest : public ::testing::Test {
 protected:
  void Serve(
      std::vector<grpc::StatusCode> refusals,
      std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials()) {
    coordinator_ = std::make_unique<ScriptedCoordinator>(std::move(refusals));
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.RegisterService(coordinator_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<CoordinatorLink> Link(int port = 0, const std::string& root_certificates = "") {
    CoordinatorLinkOptions options;
    options.root_certificates = root_certificates;
    options.address = "127.0.0.1:" + std::to_string(port != 0 ? port : port_);
    options.hello.set_job("demo");
    options.hello.set_pod("trainer-0");
    options.hello.set_token("secret");
    options.heartbeat_period = 20ms;  // plenty of messages racing the Hello
    options.keepalive_time = 500ms;
    options.keepalive_timeout = 500ms;
    return std::make_unique<CoordinatorLink>(options);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }

  std::unique_ptr<ScriptedCoordinator> coordinator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(CoordinatorLinkTest, AnUnknownJobOrAnOverloadedCoordinatorIsWaitedOutNotFatal) {
  Serve({grpc::StatusCode::NOT_FOUND, grpc::StatusCode::RESOURCE_EXHAUSTED,
         grpc::StatusCode::NOT_FOUND});
  auto link = Link();
  const auto assignment = link->WaitForGeneration(0, 60s);
  ASSERT_TRUE(assignment.has_value())
      << "the trainer gave up: " << (link->Fatal() ? link->Fatal()->ToString() : "no assignment");
  EXPECT_EQ(assignment->generation(), 1);
  EXPECT_FALSE(link->Fatal().has_value());
  EXPECT_EQ(coordinator_->first_messages().size(), 4u);
}

TEST_F(CoordinatorLinkTest, AWrongTokenIsFatalAtOnce) {
  Serve({grpc::StatusCode::UNAUTHENTICATED});
  auto link = Link();
  EXPECT_FALSE(link->WaitForGeneration(0, 10s).has_value());
  ASSERT_TRUE(link->Fatal().has_value());
  EXPECT_EQ(link->Fatal()->code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(coordinator_->first_messages().size(), 1u) << "no retry of a refusal no retry can fix";
}

TEST_F(CoordinatorLinkTest, TheHelloIsTheFirstMessageOfEveryStreamEvenWithReportsQueued) {
  // Refusals every version of the link retried, so that only the order of messages is at stake.
  Serve(std::vector<grpc::StatusCode>(12, grpc::StatusCode::ABORTED));
  auto link = Link();
  // Reports (and heartbeats) are queued all the while the link (re)connects.
  std::atomic<bool> done = false;
  std::jthread reporter([&] {
    for (int64_t step = 0; !done; ++step) {
      fulcrum::v1::StepReport report;
      report.set_generation(1);
      report.set_step(step);
      link->Report(report);
      std::this_thread::sleep_for(100us);
    }
  });
  const auto assignment = link->WaitForGeneration(0, 60s);
  done = true;
  ASSERT_TRUE(assignment.has_value());
  const auto first_messages = coordinator_->first_messages();
  ASSERT_EQ(first_messages.size(), 13u);
  for (const TrainerMessage& first : first_messages) {
    EXPECT_TRUE(first.has_hello()) << "a stream began with " << first.ShortDebugString();
  }
}

TEST_F(CoordinatorLinkTest, OverTlsTheTokenGoesOnlyToACoordinatorThatTheCaVouchesFor) {
  const coordinator::PemKeyPair ca = coordinator::MakeCertificateAuthority("ca", 24h).value();
  const coordinator::PemKeyPair serving =
      coordinator::IssueServingCertificate(ca, {"127.0.0.1"}, 24h).value();
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({serving.private_key, serving.certificate});
  Serve({}, grpc::SslServerCredentials(tls));
  {
    // Trusting another CA: the handshake fails, the Hello (with the token) is never sent, and
    // the trainer keeps retrying rather than giving up.
    const coordinator::PemKeyPair other = coordinator::MakeCertificateAuthority("x", 24h).value();
    auto fooled = Link(0, other.certificate);
    EXPECT_FALSE(fooled->WaitForGeneration(0, 2s).has_value());
    EXPECT_TRUE(coordinator_->first_messages().empty());
    EXPECT_FALSE(fooled->Fatal().has_value());
  }
  auto link = Link(0, ca.certificate);
  ASSERT_TRUE(link->WaitForGeneration(0, 60s).has_value());
  ASSERT_EQ(coordinator_->first_messages().size(), 1u);
  EXPECT_EQ(coordinator_->first_messages()[0].hello().token(), "secret");
}

TEST_F(CoordinatorLinkTest, ACoordinatorThatVanishesWithoutClosingIsNoticedByKeepaliveAndRejoined) {
  Serve({});
  FreezableProxy proxy(port_);
  auto link = Link(proxy.port());
  ASSERT_TRUE(link->WaitForGeneration(0, 60s).has_value());
  ASSERT_EQ(coordinator_->first_messages().size(), 1u);
  proxy.FreezeOpenConnections();
  // Nothing closes the frozen connection: only unanswered keepalive pings can end it.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (coordinator_->first_messages().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(coordinator_->first_messages().size(), 2u)
      << "the trainer never noticed the vanished coordinator";
  EXPECT_FALSE(link->Fatal().has_value());
}

}  // namespace
}  // namespace fulcrum::trainer
