// The log endpoint over real TLS on loopback, with certificates made by the
// openssl CLI and curl as the client (as the API server would call it).
#include "tests/tools/local_node/logs/log_server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/support/polling.h"
#include "tests/support/subprocess.h"
#include "tests/support/temporary_directory.h"

namespace fulcrum::local_node {
namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using testing::RunShell;
using testing::ShellQuote;

// Generous: the machines running tests are shared and slow at times.
constexpr auto kDeadline = 60s;

using fulcrum::testing::ReadFile;
using fulcrum::testing::WaitUntil;

void AppendToFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::app | std::ios::binary) << text;
}

// A container whose log a follow can watch: whether it is still writing, and
// how often the server asked.
struct FakeContainer {
  std::filesystem::path file;
  std::atomic<bool> writing{false};
  std::atomic<int> polls{0};
};

class FakeLogDirectory : public LogDirectory {
 public:
  void Add(const std::string& pod, std::shared_ptr<FakeContainer> container) {
    std::lock_guard lock(mutex_);
    containers_[pod] = std::move(container);
  }
  void Fail(const std::string& pod, Error error) {
    std::lock_guard lock(mutex_);
    errors_[pod] = std::move(error);
  }
  std::optional<LogRequest> last_request() const {
    std::lock_guard lock(mutex_);
    return last_request_;
  }

  Result<LogLocation> Find(const LogRequest& request) const override {
    std::lock_guard lock(mutex_);
    last_request_ = request;
    if (auto error = errors_.find(request.pod); error != errors_.end()) return error->second;
    auto found = containers_.find(request.pod);
    if (found == containers_.end() || request.ns != "ns" || request.container != "main") {
      return MakeError(
          ErrorCode::kNotFound,
          "pods \"" + request.pod + "\" not found in namespace \"" + request.ns + "\"");
    }
    std::shared_ptr<FakeContainer> container = found->second;
    return LogLocation{container->file, [container] {
                         ++container->polls;
                         return container->writing.load();
                       }};
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<FakeContainer>> containers_;
  std::map<std::string, Error> errors_;
  mutable std::optional<LogRequest> last_request_;
};

struct Answer {
  int curl_exit = -1;
  std::string status;  // "200"; "000" when no HTTP answer came
  std::string body;
  std::string curl_output;
};

// Who the client claims to be.
struct ClientIdentity {
  std::string cert;  // empty: no client certificate
  std::string key;
};

class LogServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeCertificates();
    directory_ = std::make_shared<FakeLogDirectory>();
    Result<std::unique_ptr<LogServer>> server = LogServer::Start(Options(), directory_);
    ASSERT_TRUE(server.ok()) << server.error().ToString();
    server_ = std::move(server).value();
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  void TearDown() override { server_.reset(); }

  LogServerOptions Options() const {
    LogServerOptions options;
    options.cert_file = (dir_ / "server.pem").string();
    options.key_file = (dir_ / "server.key").string();
    options.client_ca_file = (dir_ / "ca.pem").string();
    return options;
  }

  void Openssl(const std::string& arguments) {
    const testing::CommandResult result =
        RunShell("cd " + ShellQuote(dir_.string()) + " && openssl " + arguments);
    ASSERT_EQ(result.exit_code, 0) << "openssl " << arguments << "\n" << result.output;
  }

  // `name`.pem and `name`.key signed by `ca` (or self-signed as a CA when empty).
  void MakeCertificate(const std::string& name, const std::string& ca,
                       const std::string& extensions) {
    const std::string new_key =
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name + ".key";
    if (ca.empty()) {
      Openssl("req -x509 " + new_key + " -out " + name + ".pem -days 2 -subj /CN=" + name);
      return;
    }
    std::ofstream(dir_ / (name + ".ext")) << extensions << "\n";
    Openssl("req " + new_key + " -out " + name + ".csr -subj /CN=" + name);
    Openssl("x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
            ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile " + name + ".ext");
  }

  void MakeCertificates() {
    MakeCertificate("ca", "", "");
    MakeCertificate("server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth");
    MakeCertificate("apiserver-client", "ca", "extendedKeyUsage=clientAuth");
    MakeCertificate("other-ca", "", "");
    MakeCertificate("stranger", "other-ca", "extendedKeyUsage=clientAuth");
  }

  ClientIdentity ApiServer() const {
    return {(dir_ / "apiserver-client.pem").string(), (dir_ / "apiserver-client.key").string()};
  }

  // GET https://127.0.0.1:port`target` with curl; `extra` is added to its arguments.
  Answer Get(const std::string& target, const ClientIdentity& identity,
             const std::string& extra = "") {
    return RunCurl(target, identity, extra, NewBodyFile());
  }
  Answer Get(const std::string& target) { return Get(target, ApiServer()); }

  // Starts a GET on another thread; the body lands in `*body` as it is sent.
  std::future<Answer> GetInBackground(const std::string& target, std::filesystem::path* body) {
    *body = NewBodyFile();
    return std::async(std::launch::async, [this, target, file = *body] {
      return RunCurl(target, ApiServer(), "", file);
    });
  }

  std::filesystem::path NewBodyFile() { return dir_ / ("body-" + std::to_string(++requests_)); }

  // Reads only what SetUp wrote, so it may run on any thread.
  Answer RunCurl(const std::string& target, const ClientIdentity& identity,
                 const std::string& extra, const std::filesystem::path& body) const {
    std::string command =
        "curl -sS -g -N --max-time 120 --cacert " + ShellQuote((dir_ / "ca.pem").string());
    if (!identity.cert.empty()) {
      command += " --cert " + ShellQuote(identity.cert) + " --key " + ShellQuote(identity.key);
    }
    command += " -o " + ShellQuote(body.string()) + " -w '%{http_code}' " + extra + " " +
               ShellQuote("https://127.0.0.1:" + std::to_string(port_) + target);
    const testing::CommandResult result = RunShell(command);
    Answer answer;
    answer.curl_exit = result.exit_code;
    answer.curl_output = result.output;
    answer.status = result.output.substr(0, 3);
    answer.body = ReadFile(body);
    return answer;
  }

  std::shared_ptr<FakeContainer> AddContainer(const std::string& pod, const std::string& content,
                                              bool writing = false) {
    auto container = std::make_shared<FakeContainer>();
    container->file = dir_ / (pod + ".log");
    if (!content.empty()) AppendToFile(container->file, content);
    container->writing = writing;
    directory_->Add(pod, container);
    return container;
  }

  fulcrum::testing::TemporaryDirectory temp_{"log-server-test"};
  const std::filesystem::path dir_ = temp_.path();
  std::shared_ptr<FakeLogDirectory> directory_;
  std::unique_ptr<LogServer> server_;
  int port_ = 0;  // kept, so a test may stop the server and still name its port
  int requests_ = 0;
};

TEST_F(LogServerTest, ServesAContainersLogToTheApiServer) {
  AddContainer("trainer-0", "epoch 1\nepoch 2\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main");
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "epoch 1\nepoch 2\n");
}

TEST_F(LogServerTest, RefusesAClientWithoutACertificate) {
  AddContainer("trainer-0", "secret training data\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main", ClientIdentity{});
  EXPECT_NE(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_NE(answer.status, "200");
  EXPECT_EQ(answer.body.find("secret"), std::string::npos);
  // The same request with the API server's certificate is served, so the
  // refusal above was about the certificate.
  EXPECT_EQ(Get("/containerLogs/ns/trainer-0/main").body, "secret training data\n");
}

TEST_F(LogServerTest, RefusesAClientWhoseCertificateIsFromAnotherCa) {
  AddContainer("trainer-0", "secret training data\n");
  const ClientIdentity stranger{(dir_ / "stranger.pem").string(), (dir_ / "stranger.key").string()};
  const Answer answer = Get("/containerLogs/ns/trainer-0/main", stranger);
  EXPECT_NE(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_NE(answer.status, "200");
  EXPECT_EQ(answer.body.find("secret"), std::string::npos);
}

TEST_F(LogServerTest, TailLinesSendsOnlyTheLastLines) {
  AddContainer("trainer-0", "one\ntwo\nthree\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main?tailLines=2");
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "two\nthree\n");
}

TEST_F(LogServerTest, LimitBytesCutsTheLogShort) {
  AddContainer("trainer-0", "0123456789\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main?limitBytes=4");
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "0123");
}

TEST_F(LogServerTest, LimitBytesEndsAFollowOfARunningContainer) {
  auto container = AddContainer("trainer-0", "0123", /*writing=*/true);
  std::filesystem::path body;
  std::future<Answer> follow =
      GetInBackground("/containerLogs/ns/trainer-0/main?follow=true&limitBytes=6", &body);
  AppendToFile(container->file, "456789");  // the container never stops writing
  ASSERT_EQ(follow.wait_for(kDeadline), std::future_status::ready);
  const Answer answer = follow.get();
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.body, "012345");
}

TEST_F(LogServerTest, ServesALogFileThatDoesNotExistYetAsEmpty) {
  AddContainer("starting", "");
  const Answer answer = Get("/containerLogs/ns/starting/main");
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "");
}

TEST_F(LogServerTest, FollowStreamsAppendedLinesAndEndsWhenTheContainerStopsWriting) {
  auto container = AddContainer("trainer-0", "first\n", /*writing=*/true);
  std::filesystem::path body;
  std::future<Answer> follow =
      GetInBackground("/containerLogs/ns/trainer-0/main?follow=true", &body);

  ASSERT_TRUE(WaitUntil([&] { return ReadFile(body) == "first\n"; })) << ReadFile(body);
  AppendToFile(container->file, "second\n");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(body) == "first\nsecond\n"; })) << ReadFile(body);
  EXPECT_NE(follow.wait_for(0s), std::future_status::ready)
      << "the follow ended while the container was writing";

  // Written just before the container ended: still part of the response.
  AppendToFile(container->file, "last\n");
  container->writing = false;
  ASSERT_EQ(follow.wait_for(kDeadline), std::future_status::ready);
  const Answer answer = follow.get();
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "first\nsecond\nlast\n");
}

TEST_F(LogServerTest, FollowStopsPollingOnceTheClientDisconnects) {
  auto container = AddContainer("trainer-0", "hello\n", /*writing=*/true);
  // curl gives up after 2 s, as a kubectl user pressing Ctrl-C would.
  const Answer answer =
      Get("/containerLogs/ns/trainer-0/main?follow=true", ApiServer(), "--max-time 2");
  EXPECT_EQ(answer.body, "hello\n");
  ASSERT_GT(container->polls.load(), 0);
  EXPECT_TRUE(WaitUntil([&] {
    const int before = container->polls.load();
    std::this_thread::sleep_for(1s);  // ten poll intervals
    return container->polls.load() == before;
  })) << "the server kept following a log nobody reads";
}

TEST_F(LogServerTest, AnswersNotFoundWithTheDirectorysMessage) {
  const Answer answer = Get("/containerLogs/ns/ghost/main");
  EXPECT_EQ(answer.status, "404");
  EXPECT_EQ(answer.body, "pods \"ghost\" not found in namespace \"ns\"");
}

TEST_F(LogServerTest, AnswersBadRequestWithTheDirectorysMessageForMissingPreviousLogs) {
  directory_->Fail(
      "trainer-0",
      MakeError(ErrorCode::kFailedPrecondition,
                "previous terminated container \"main\" in pod \"trainer-0\" not found"));
  const Answer answer = Get("/containerLogs/ns/trainer-0/main?previous=true");
  EXPECT_EQ(answer.status, "400");
  EXPECT_EQ(answer.body, "previous terminated container \"main\" in pod \"trainer-0\" not found");
  ASSERT_TRUE(directory_->last_request().has_value());
  EXPECT_TRUE(directory_->last_request()->previous);
}

TEST_F(LogServerTest, AnswersInternalErrorForOtherDirectoryErrors) {
  directory_->Fail("trainer-0", MakeError(ErrorCode::kInternal, "state file unreadable"));
  const Answer answer = Get("/containerLogs/ns/trainer-0/main");
  EXPECT_EQ(answer.status, "500");
  EXPECT_EQ(answer.body, "state file unreadable");
}

TEST_F(LogServerTest, RefusesTimestampsBecauseTheLogsHaveNone) {
  AddContainer("trainer-0", "line\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main?timestamps=true");
  EXPECT_EQ(answer.status, "400");
  EXPECT_NE(answer.body.find("no per-line timestamps"), std::string::npos) << answer.body;
}

TEST_F(LogServerTest, AnswersBadRequestNamingAMalformedParameter) {
  AddContainer("trainer-0", "line\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main?tailLines=ten");
  EXPECT_EQ(answer.status, "400");
  EXPECT_NE(answer.body.find("tailLines"), std::string::npos) << answer.body;
}

TEST_F(LogServerTest, DecodesEscapedPathSegments) {
  AddContainer("my-pod", "decoded\n");
  const Answer answer = Get("/containerLogs/ns/my%2Dpod/main");
  EXPECT_EQ(answer.status, "200");
  EXPECT_EQ(answer.body, "decoded\n");
}

TEST_F(LogServerTest, AnswersNotImplementedForExecAsAStatusKubectlCanDecode) {
  const Answer answer = Get("/exec/ns/trainer-0/main?command=ls&stdout=1");
  EXPECT_EQ(answer.status, "501");
  const nlohmann::json status = nlohmann::json::parse(answer.body, nullptr, false);
  ASSERT_TRUE(status.is_object()) << answer.body;
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["code"], 501);
  EXPECT_NE(
      answer.body.find("is not supported by fulcrum-local-node: its pods are local processes"),
      std::string::npos)
      << answer.body;
}

TEST_F(LogServerTest, AnswersHealthzAndNotFoundForOtherPaths) {
  EXPECT_EQ(Get("/healthz").body, "ok");
  EXPECT_EQ(Get("/healthz").status, "200");
  EXPECT_EQ(Get("/metrics").status, "404");
  EXPECT_EQ(Get("/containerLogs/ns/trainer-0").status, "404");
}

TEST_F(LogServerTest, RefusesMethodsOtherThanGet) {
  AddContainer("trainer-0", "line\n");
  EXPECT_EQ(Get("/containerLogs/ns/trainer-0/main", ApiServer(), "-X POST").status, "405");
}

TEST_F(LogServerTest, ExecArrivingAsAPostUpgradeGetsTheNotSupportedSentence) {
  const auto answer = Get("/exec/ns/trainer-0/main?command=true", ApiServer(), "-X POST");
  EXPECT_EQ(answer.status, "501");
  EXPECT_NE(answer.body.find("exec is not supported by fulcrum-local-node"), std::string::npos)
      << answer.body;
}

TEST_F(LogServerTest, ServesSeveralRequestsOnOneConnection) {
  AddContainer("trainer-0", "first pod\n");
  AddContainer("trainer-1", "second pod\n");
  // Two URLs in one curl invocation share a connection when the server keeps it
  // alive; -v makes curl say so. curl pairs its -o options with the URLs in
  // order: Get's own -o with the URL in the extra arguments, which comes first.
  const std::filesystem::path second_body = dir_ / "second-body";
  const Answer answer = Get("/containerLogs/ns/trainer-1/main", ApiServer(),
                            "-v " +
                                ShellQuote("https://127.0.0.1:" + std::to_string(port_) +
                                           "/containerLogs/ns/trainer-0/main") +
                                " -o " + ShellQuote(second_body.string()));
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.body, "first pod\n");
  EXPECT_EQ(ReadFile(second_body), "second pod\n");
  EXPECT_NE(answer.curl_output.find("Re-using existing connection"), std::string::npos)
      << answer.curl_output;
}

TEST_F(LogServerTest, ServesHttp10ClientsWithoutChunks) {
  AddContainer("trainer-0", "plain\n");
  const Answer answer = Get("/containerLogs/ns/trainer-0/main", ApiServer(), "--http1.0");
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;
  EXPECT_EQ(answer.body, "plain\n");
}

TEST_F(LogServerTest, DestructorEndsAnOpenFollowAndReturns) {
  AddContainer("trainer-0", "still running\n", /*writing=*/true);
  std::filesystem::path body;
  std::future<Answer> follow =
      GetInBackground("/containerLogs/ns/trainer-0/main?follow=true", &body);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(body) == "still running\n"; })) << ReadFile(body);

  std::future<void> stopped = std::async(std::launch::async, [this] { server_.reset(); });
  ASSERT_EQ(stopped.wait_for(kDeadline), std::future_status::ready) << "the destructor hung";
  ASSERT_EQ(follow.wait_for(kDeadline), std::future_status::ready)
      << "the follow outlived the server";
  const Answer answer = follow.get();
  EXPECT_EQ(answer.curl_exit, 0) << answer.curl_output;  // ended cleanly, not cut
  EXPECT_EQ(answer.body, "still running\n");
}

TEST_F(LogServerTest, DestructorClosesConnectionsIdleBetweenRequests) {
  // A TLS client that connects and then only waits, as an API server's idle
  // keep-alive connection does.
  net::io_context io;
  ssl::context tls(ssl::context::tls_client);
  tls.load_verify_file((dir_ / "ca.pem").string());
  tls.use_certificate_chain_file(ApiServer().cert);
  tls.use_private_key_file(ApiServer().key, ssl::context::pem);
  tls.set_verify_mode(ssl::verify_peer);
  ssl::stream<tcp::socket> stream(io, tls);
  stream.next_layer().connect(
      {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)});
  stream.handshake(ssl::stream_base::client);
  std::future<boost::system::error_code> idle = std::async(std::launch::async, [&stream] {
    std::array<char, 256> buffer{};
    boost::system::error_code error;
    while (!error) stream.read_some(net::buffer(buffer), error);
    return error;
  });

  std::future<void> stopped = std::async(std::launch::async, [this] { server_.reset(); });
  EXPECT_EQ(stopped.wait_for(kDeadline), std::future_status::ready) << "the destructor hung";
  const bool closed = idle.wait_for(kDeadline) == std::future_status::ready;
  EXPECT_TRUE(closed) << "the server left the idle connection open";
  if (!closed) ::shutdown(stream.next_layer().native_handle(), SHUT_RDWR);  // unblock the reader
  EXPECT_TRUE(idle.get()) << "the read ended without an error, so not by a close";
}

// ---- Start's errors name the option at fault --------------------------------

TEST_F(LogServerTest, StartNamesAnUnreadableCertFile) {
  LogServerOptions options = Options();
  options.cert_file = (dir_ / "missing.pem").string();
  Result<std::unique_ptr<LogServer>> server = LogServer::Start(options, directory_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().field, "cert_file");
  EXPECT_NE(server.error().message.find("missing.pem"), std::string::npos)
      << server.error().message;
}

TEST_F(LogServerTest, StartNamesAKeyThatDoesNotMatchTheCertificate) {
  LogServerOptions options = Options();
  options.key_file = (dir_ / "ca.key").string();
  Result<std::unique_ptr<LogServer>> server = LogServer::Start(options, directory_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().field, "key_file");
}

TEST_F(LogServerTest, StartNamesAClientCaFileThatHoldsNoCertificate) {
  LogServerOptions options = Options();
  options.client_ca_file = (dir_ / "server.ext").string();
  Result<std::unique_ptr<LogServer>> server = LogServer::Start(options, directory_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().field, "client_ca_file");
}

TEST_F(LogServerTest, StartSaysWhichPortIsInUse) {
  LogServerOptions options = Options();
  options.port = server_->port();
  Result<std::unique_ptr<LogServer>> second = LogServer::Start(options, directory_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().field, "port");
  EXPECT_NE(second.error().message.find(std::to_string(options.port)), std::string::npos)
      << second.error().message;
  EXPECT_NE(second.error().message.find("in use"), std::string::npos) << second.error().message;
}

TEST_F(LogServerTest, StartNamesAnAddressThatIsNotAnIp) {
  LogServerOptions options = Options();
  options.address = "kubelet.local";
  Result<std::unique_ptr<LogServer>> server = LogServer::Start(options, directory_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().field, "address");
}

}  // namespace
}  // namespace fulcrum::local_node
