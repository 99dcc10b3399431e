// The coordinator's gRPC service in-process on loopback: membership over real streams, and
// every kind of bad input answered with a status that says why, while other trainers go on.
#include "operator/coordinator/coordinator_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/freezable_proxy.h"
#include "tests/support/polling.h"

namespace fulcrum::coordinator {
namespace {

using fulcrum::v1::CoordinatorMessage;
using fulcrum::v1::TrainerMessage;

constexpr const char* kToken = "job-secret-123";

// Every trainer serves its own TCPStore; the coordinator refuses a second claim to one.
std::string StoreOf(const std::string& pod) {
  return "127.0.0.1:" + std::to_string(1000 + std::hash<std::string>{}(pod) % 50000);
}

class Trainer {
 public:
  Trainer(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(fulcrum::v1::Coordinator::NewStub(channel)) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Session(&context_);
  }
  bool Send(const TrainerMessage& message) { return stream_->Write(message); }
  bool Hello(const std::string& pod, const std::string& job = "demo",
             const std::string& token = kToken) {
    TrainerMessage message;
    fulcrum::v1::Hello& hello = *message.mutable_hello();
    hello.set_job(job);
    hello.set_pod(pod);
    hello.set_token(token);
    hello.set_store_address(StoreOf(pod));
    return Send(message);
  }
  // The next Assignment (skipping Controls); nullopt when the stream ends.
  std::optional<fulcrum::v1::Assignment> NextAssignment() {
    CoordinatorMessage message;
    while (stream_->Read(&message)) {
      if (message.has_assignment()) return message.assignment();
    }
    return std::nullopt;
  }
  bool Read(CoordinatorMessage* message) { return stream_->Read(message); }
  grpc::Status Finish() {
    stream_->WritesDone();
    CoordinatorMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<fulcrum::v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<TrainerMessage, CoordinatorMessage>> stream_;
};

// Job "demo": 32 samples a step, training from one worker on.
JobSessionConfig DemoJob() {
  JobSessionConfig job;
  job.name = "demo";
  job.token = kToken;
  job.global_batch = 32;
  job.min_workers = 1;
  job.settle = std::chrono::milliseconds(50);
  // These hand-driven trainers send no heartbeats: one silent for a second while another
  // speaks would be taken for hung (job_session_test covers that).
  job.hang_timeout = std::chrono::milliseconds(0);
  return job;
}

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = CoordinatorServer::Start("127.0.0.1:0");
    ASSERT_TRUE(server.ok());
    server_ = std::move(*server);
    ASSERT_TRUE(server_->service().AddJob(DemoJob()).ok());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CoordinatorServiceTest, GenerationsHaveDenseRanksAndRank0sRendezvous) {
  Trainer first(channel_);
  ASSERT_TRUE(first.Hello("a"));
  auto assignment = first.NextAssignment();
  ASSERT_TRUE(assignment);
  EXPECT_EQ(assignment->generation(), 1);
  EXPECT_EQ(assignment->world_size(), 1);
  EXPECT_EQ(assignment->batches_size(), 1);
  EXPECT_EQ(assignment->batches(0), 32);

  Trainer second(channel_);
  ASSERT_TRUE(second.Hello("bb"));
  auto to_first = first.NextAssignment();
  auto to_second = second.NextAssignment();
  ASSERT_TRUE(to_first && to_second);
  EXPECT_EQ(to_first->generation(), 2);
  EXPECT_EQ(to_second->generation(), 2);
  EXPECT_EQ(to_first->rank(), 0);
  EXPECT_EQ(to_second->rank(), 1);
  EXPECT_EQ(to_second->rendezvous_address(), StoreOf("a"));
  EXPECT_EQ(to_first->batches(0) + to_first->batches(1), 32);

  const auto jobs = server_->service().Snapshot();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].membership_generation, 2);
  EXPECT_EQ(jobs[0].members.size(), 2u);
}

TEST_F(CoordinatorServiceTest, ATrainerWithoutAProductGetsItsNodesProductAsItsPrior) {
  server_->service().SetNodeProductLookup(
      [](const std::string& node) { return node == "t4-node" ? "Tesla-T4" : ""; });
  Trainer trainer(channel_);
  TrainerMessage message;
  fulcrum::v1::Hello& hello = *message.mutable_hello();
  hello.set_job("demo");
  hello.set_pod("p0");
  hello.set_node("t4-node");
  hello.set_token(kToken);
  hello.set_store_address("127.0.0.1:1001");
  ASSERT_TRUE(trainer.Send(message));
  ASSERT_TRUE(trainer.NextAssignment().has_value());
  const auto jobs = server_->service().Snapshot();
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_EQ(jobs[0].members.size(), 1u);
  EXPECT_EQ(jobs[0].members[0].gpu_product, "Tesla-T4");
}

TEST_F(CoordinatorServiceTest, AddingARunningJobAgainAppliesTheEditLive) {
  Trainer trainer(channel_);
  ASSERT_TRUE(trainer.Hello("p0"));
  ASSERT_TRUE(trainer.NextAssignment().has_value());
  JobSessionConfig edited = DemoJob();
  edited.global_batch = 64;
  ASSERT_TRUE(server_->service().AddJob(edited).ok());
  EXPECT_EQ(server_->service().Snapshot()[0].global_batch, 64);
  EXPECT_EQ(server_->service().Snapshot()[0].membership_generation, 1);
  EXPECT_TRUE(server_->service().HasJob("demo"));
  EXPECT_FALSE(server_->service().HasJob("other"));
}

TEST_F(CoordinatorServiceTest, RegisteringAWaitingJobAgainKeepsTheTrainersThatJoined) {
  JobSessionConfig waiting = DemoJob();
  waiting.name = "waiting";
  waiting.min_workers = 2;
  ASSERT_TRUE(server_->service().AddJob(waiting).ok());
  Trainer first(channel_);
  ASSERT_TRUE(first.Hello("p0", "waiting"));
  ASSERT_TRUE(fulcrum::testing::WaitUntil(
      [&] { return server_->service().SnapshotOf("waiting")->members.size() == 1; }));
  ASSERT_TRUE(server_->service().AddJob(waiting).ok());  // as the operator does on every reconcile
  Trainer second(channel_);
  ASSERT_TRUE(second.Hello("p1", "waiting"));
  const auto assignment = first.NextAssignment();
  ASSERT_TRUE(assignment.has_value());
  EXPECT_EQ(assignment->world_size(), 2) << "p0 was still a member when p1 made two";
  EXPECT_FALSE(server_->service().SnapshotOf("nobody").has_value());
}

TEST_F(CoordinatorServiceTest, ControlsReachEveryConnectedTrainer) {
  Trainer trainer(channel_);
  ASSERT_TRUE(trainer.Hello("a"));
  ASSERT_TRUE(trainer.NextAssignment());
  ASSERT_TRUE(server_->service().SendControl("demo", fulcrum::v1::Control::STOP, "job done").ok());
  EXPECT_EQ(server_->service().SendControl("other", fulcrum::v1::Control::STOP, "").error().code,
            ErrorCode::kNotFound);
  CoordinatorMessage message;
  ASSERT_TRUE(trainer.Read(&message));
  ASSERT_TRUE(message.has_control());
  EXPECT_EQ(message.control().action(), fulcrum::v1::Control::STOP);
  EXPECT_EQ(message.control().reason(), "job done");
}

TEST_F(CoordinatorServiceTest, TheOperatorHearsOfEveryGenerationAndControlButNotOfPlainReports) {
  std::mutex mutex;
  std::vector<std::string> changed;
  server_->service().SetJobChangeObserver([&](std::string_view job) {
    std::lock_guard lock(mutex);
    changed.emplace_back(job);
  });
  const auto heard = [&] {
    std::lock_guard lock(mutex);
    return changed.size();
  };
  Trainer trainer(channel_);
  ASSERT_TRUE(trainer.Hello("a"));
  const auto assignment = trainer.NextAssignment();  // generation 1 formed
  ASSERT_TRUE(assignment);
  EXPECT_TRUE(fulcrum::testing::WaitUntil([&] { return heard() == 1; }));
  // A report that changes no plan sends nothing, so the operator is not woken for it.
  TrainerMessage report;
  report.mutable_step_report()->set_generation(assignment->generation());
  report.mutable_step_report()->set_step(0);
  report.mutable_step_report()->set_local_batch(32);
  report.mutable_step_report()->set_compute_seconds(0.01);
  report.mutable_step_report()->set_step_seconds(0.012);
  ASSERT_TRUE(trainer.Send(report));
  ASSERT_TRUE(fulcrum::testing::WaitUntil(
      [&] { return server_->service().SnapshotOf("demo")->step >= 0; }));
  EXPECT_EQ(heard(), 1u);
  ASSERT_TRUE(server_->service().SendControl("demo", fulcrum::v1::Control::STOP, "done").ok());
  EXPECT_EQ(heard(), 2u);
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(changed, (std::vector<std::string>{"demo", "demo"}));
  }
  // Cleared, it is never called again (the controller clears it before it goes away).
  server_->service().SetJobChangeObserver({});
  ASSERT_TRUE(server_->service().SendControl("demo", fulcrum::v1::Control::STOP, "again").ok());
  EXPECT_EQ(heard(), 2u);
}

TEST_F(CoordinatorServiceTest, WrongTokenIsUnauthenticated) {
  Trainer trainer(channel_);
  trainer.Hello("a", "demo", "not-the-token");
  const grpc::Status status = trainer.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(status.error_message().find("wrong token"), std::string::npos)
      << status.error_message();
}

TEST_F(CoordinatorServiceTest, UnknownJobIsNotFound) {
  Trainer trainer(channel_);
  trainer.Hello("a", "no-such-job");
  const grpc::Status status = trainer.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("no-such-job"), std::string::npos)
      << status.error_message();
}

TEST_F(CoordinatorServiceTest, FirstMessageMustBeAHello) {
  Trainer trainer(channel_);
  TrainerMessage report;
  report.mutable_step_report()->set_step(1);
  trainer.Send(report);
  const grpc::Status status = trainer.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("Hello"), std::string::npos) << status.error_message();
}

TEST_F(CoordinatorServiceTest, MalformedFieldsAreNamed) {
  {
    Trainer trainer(channel_);
    TrainerMessage message;
    message.mutable_hello()->set_job("demo");
    message.mutable_hello()->set_token(kToken);
    message.mutable_hello()->set_store_address("127.0.0.1:1");
    trainer.Send(message);  // no pod
    const grpc::Status status = trainer.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("hello.pod"), std::string::npos)
        << status.error_message();
  }
  {
    Trainer trainer(channel_);
    trainer.Hello("a");
    ASSERT_TRUE(trainer.NextAssignment());
    TrainerMessage report;
    report.mutable_step_report()->set_generation(1);
    report.mutable_step_report()->set_compute_seconds(-1.0);
    trainer.Send(report);
    const grpc::Status status = trainer.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("step_report.compute_seconds"), std::string::npos)
        << status.error_message();
  }
  {
    Trainer trainer(channel_);
    trainer.Hello("b");
    ASSERT_TRUE(trainer.NextAssignment());
    trainer.Send(TrainerMessage());  // no body
    const grpc::Status status = trainer.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("body"), std::string::npos) << status.error_message();
  }
}

TEST_F(CoordinatorServiceTest, BytesThatAreNotATrainerMessageAreRejected) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> raw(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod("/fulcrum.v1.Coordinator/Session",
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  const std::string garbage = "\x0a\xff\xff\xff\xff\x0f not protobuf";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer buffer(&slice, 1);
  raw->Write(buffer);
  raw->WritesDone();
  grpc::ByteBuffer ignored;
  while (raw->Read(&ignored)) {
  }
  const grpc::Status status = raw->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("not a valid TrainerMessage"), std::string::npos)
      << status.error_message();
}

TEST_F(CoordinatorServiceTest, OversizedMessageIsResourceExhausted) {
  Trainer trainer(channel_);
  TrainerMessage message;
  message.mutable_hello()->set_job("demo");
  message.mutable_hello()->set_pod(std::string(100 * 1024, 'x'));
  trainer.Send(message);
  const grpc::Status status = trainer.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}

TEST_F(CoordinatorServiceTest, StaleGenerationIsRejectedWhileOthersKeepBeingServed) {
  Trainer a(channel_);
  a.Hello("a");
  ASSERT_EQ(a.NextAssignment()->generation(), 1);
  Trainer b(channel_);
  b.Hello("bb");
  ASSERT_EQ(a.NextAssignment()->generation(), 2);
  ASSERT_EQ(b.NextAssignment()->generation(), 2);
  Trainer c(channel_);
  c.Hello("ccc");
  ASSERT_EQ(a.NextAssignment()->generation(), 3);
  ASSERT_EQ(b.NextAssignment()->generation(), 3);
  ASSERT_EQ(c.NextAssignment()->generation(), 3);

  TrainerMessage stale;
  stale.mutable_step_report()->set_generation(1);
  stale.mutable_step_report()->set_step(5);
  a.Send(stale);
  const grpc::Status status = a.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("stale generation 1"), std::string::npos)
      << status.error_message();

  // The others are still served: a's departure forms generation 4 for b and c.
  auto to_b = b.NextAssignment();
  auto to_c = c.NextAssignment();
  ASSERT_TRUE(to_b && to_c);
  EXPECT_EQ(to_b->generation(), 4);
  EXPECT_EQ(to_b->world_size(), 2);
  EXPECT_EQ(to_c->rank(), 1);
}

// The threads of this process, from /proc/self/status.
int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// Streams are reactors on gRPC's threads, not a thread each: 300 trainers of 30 jobs, all
// joined and sent their Assignments, add a few threads, not 300 or 600 (a reader and a writer
// thread per stream, as the coordinator once had, cost 6,400 threads at 3,200 trainers).
TEST_F(CoordinatorServiceTest, ThreeHundredStreamsDoNotTakeAThreadEach) {
  constexpr int kJobs = 30;
  constexpr int kTrainersPerJob = 10;
  for (int j = 0; j < kJobs; ++j) {
    JobSessionConfig job = DemoJob();
    job.name = "job-" + std::to_string(j);
    job.min_workers = kTrainersPerJob;  // one generation, once all are in
    ASSERT_TRUE(server_->service().AddJob(job).ok());
  }
  const int threads_before = ThreadsOfThisProcess();
  ASSERT_GT(threads_before, 0);
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (int j = 0; j < kJobs; ++j) {
    for (int t = 0; t < kTrainersPerJob; ++t) {
      trainers.push_back(std::make_unique<Trainer>(channel_));
      ASSERT_TRUE(trainers.back()->Hello("t" + std::to_string(t), "job-" + std::to_string(j)));
    }
  }
  for (auto& trainer : trainers) {
    const auto assignment = trainer->NextAssignment();
    ASSERT_TRUE(assignment);
    EXPECT_EQ(assignment->world_size(), kTrainersPerJob);
  }
  const int threads_after = ThreadsOfThisProcess();
  EXPECT_LT(threads_after - threads_before, 50)
      << threads_before << " threads before, " << threads_after << " with 300 streams open";
  for (auto& trainer : trainers) EXPECT_TRUE(trainer->Finish().ok());
}

// A coordinator with small limits, to reach them in a test.
class CoordinatorLimitsTest : public ::testing::Test {
 protected:
  void Start(CoordinatorLimits limits) {
    service_ = std::make_unique<CoordinatorService>(limits);
    auto server = CoordinatorServer::Start("127.0.0.1:0", *service_);
    ASSERT_TRUE(server.ok());
    server_ = std::move(*server);
    ASSERT_TRUE(service_->AddJob(DemoJob()).ok());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CoordinatorLimitsTest, AStreamThatNeverSaysHelloIsClosedAfterTheHelloTimeout) {
  Start({.hello_timeout = std::chrono::milliseconds(300)});
  Trainer silent(channel_);  // opens the stream and sends nothing (its own deadline is 60 s)
  CoordinatorMessage message;
  EXPECT_FALSE(silent.Read(&message));
  // The server cancelled it (a cancelled stream carries no message), long before the client's
  // own deadline would have ended it with DEADLINE_EXCEEDED.
  EXPECT_EQ(silent.Finish().error_code(), grpc::StatusCode::CANCELLED);
  // A trainer that does speak is served as usual.
  Trainer trainer(channel_);
  ASSERT_TRUE(trainer.Hello("a"));
  EXPECT_TRUE(trainer.NextAssignment().has_value());
}

TEST_F(CoordinatorLimitsTest, StreamsBeyondTheJobsCapAreRefusedWhileTheJobsTrainersStay) {
  Start({.max_streams_per_job = 2});
  Trainer a(channel_);
  ASSERT_TRUE(a.Hello("a"));
  ASSERT_TRUE(a.NextAssignment());
  Trainer b(channel_);
  ASSERT_TRUE(b.Hello("bb"));
  ASSERT_TRUE(b.NextAssignment());
  Trainer c(channel_);
  ASSERT_TRUE(c.Hello("ccc"));
  const grpc::Status refused = c.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("max_streams_per_job"), std::string::npos)
      << refused.error_message();
  const auto job = service_->SnapshotOf("demo");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->members.size(), 2u);
  for (const MemberSnapshot& member : job->members) EXPECT_TRUE(member.connected) << member.pod;
}

TEST_F(CoordinatorLimitsTest, StreamsBeyondTheTotalCapAreRefusedBeforeTheyCanSayHello) {
  Start({.max_streams = 2});
  Trainer first(channel_);
  Trainer second(channel_);  // two silent streams hold both places
  ASSERT_TRUE(fulcrum::testing::WaitUntil(
      [&] {
        Trainer probe(channel_);
        return probe.Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      std::chrono::seconds(10)));
  Trainer third(channel_);
  third.Hello("a");
  const grpc::Status refused = third.Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("max_streams"), std::string::npos)
      << refused.error_message();
}

TEST_F(CoordinatorLimitsTest, ATrainerThatStopsReadingIsCancelledInsteadOfPinningItsWriter) {
  Start({.max_queued_messages = 8});
  Trainer deaf(channel_);
  ASSERT_TRUE(deaf.Hello("a"));
  ASSERT_TRUE(fulcrum::testing::WaitUntil(
      [&] { return service_->SnapshotOf("demo")->membership_generation == 1; },
      std::chrono::seconds(10)));
  // The trainer reads nothing more: once flow control stops the writer, the queue fills.
  const std::string reason(1000, 'x');
  bool cancelled = false;
  for (int i = 0; i < 200000 && !cancelled; ++i) {
    ASSERT_TRUE(service_->SendControl("demo", fulcrum::v1::Control::CHECKPOINT, reason).ok());
    if (i % 100 == 0) {
      const auto job = service_->SnapshotOf("demo");
      cancelled = job->members.empty() || !job->members[0].connected;
    }
  }
  EXPECT_TRUE(cancelled) << "the coordinator still holds the stream of a trainer that never reads";
}

// Over TLS, a trainer that trusts the coordinator's CA is served; one that trusts another CA,
// or speaks plaintext, never gets as far as sending its token.
TEST(CoordinatorTls, OnlyTrainersThatVerifyTheCoordinatorAgainstItsCaAreServed) {
  using namespace std::chrono_literals;
  const PemKeyPair ca = MakeCertificateAuthority("fulcrum-coordinator-ca", 24h).value();
  const PemKeyPair serving = IssueServingCertificate(ca, {"127.0.0.1"}, 24h).value();
  auto server = CoordinatorServer::Start("127.0.0.1:0", serving);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->service().AddJob(DemoJob()).ok());
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto channel_trusting = [&](const std::string& root) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = root;
    return grpc::CreateChannel(address, grpc::SslCredentials(options));
  };
  Trainer trusting(channel_trusting(ca.certificate));
  ASSERT_TRUE(trusting.Hello("a"));
  EXPECT_TRUE(trusting.NextAssignment().has_value());

  const PemKeyPair other_ca = MakeCertificateAuthority("someone-else", 24h).value();
  Trainer fooled(channel_trusting(other_ca.certificate));
  fooled.Hello("bb");
  EXPECT_EQ(fooled.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  Trainer plaintext(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  plaintext.Hello("ccc");
  EXPECT_EQ(plaintext.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ((*server)->service().SnapshotOf("demo")->members.size(), 1u);
  (*server)->Shutdown();
}

// A trainer whose host vanishes (its connection goes silent: no FIN, no RST, no heartbeats) is
// noticed by the coordinator's gRPC keepalive within seconds and leaves the job. The heartbeat
// timeout is an hour here, so nothing but keepalive can notice it within the test's wait.
TEST(CoordinatorKeepalive, AVanishedTrainerIsNoticedByKeepaliveLongBeforeItsHeartbeatTimeout) {
  auto server = CoordinatorServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok());
  JobSessionConfig job = DemoJob();
  job.leave_timeout = std::chrono::milliseconds(200);
  job.heartbeat_timeout = std::chrono::hours(1);
  ASSERT_TRUE((*server)->service().AddJob(job).ok());
  fulcrum::testing::FreezableProxy proxy((*server)->port());
  Trainer trainer(grpc::CreateChannel("127.0.0.1:" + std::to_string(proxy.port()),
                                      grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(trainer.Hello("vanishing"));
  ASSERT_TRUE(trainer.NextAssignment());
  ASSERT_EQ((*server)->service().Snapshot()[0].members.size(), 1u);

  proxy.FreezeOpenConnections();
  const bool noticed = fulcrum::testing::WaitUntil(
      [&] {
        const auto jobs = (*server)->service().Snapshot();
        return jobs[0].members.empty() || !jobs[0].members[0].connected;
      },
      // Keepalive takes about 10 s (a ping after 5 s of silence, 5 s for its answer). Well
      // inside the Trainer's 60 s call deadline, which the server would also act on.
      std::chrono::seconds(40));
  EXPECT_TRUE(noticed) << "the coordinator still counts the vanished trainer as connected";
  (*server)->Shutdown();
}

}  // namespace
}  // namespace fulcrum::coordinator
