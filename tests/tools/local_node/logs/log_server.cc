#include "tests/tools/local_node/logs/log_server.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "common/log.h"
#include "tests/tools/local_node/logs/log_file.h"
#include "tests/tools/local_node/logs/request_target.h"

namespace fulcrum::local_node {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using TlsStream = ssl::stream<tcp::socket>;
using Request = http::request<http::string_body>;

// How often a follow looks for appended data, as kubelet's own log follower does.
constexpr std::chrono::milliseconds kFollowPollInterval{100};
// On stop, how long open responses get to send their last chunk before their
// sockets are shut down under them.
constexpr std::chrono::milliseconds kStopGrace{500};
// After a failed accept (out of descriptors, say), how long to wait before the next.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// One chunk of a log response at most; a follow sends what it finds as it finds it.
constexpr std::size_t kChunkBytes = 64 * 1024;
// Requests to this endpoint are bodiless GETs; anything bigger is not one of them.
constexpr std::uint64_t kRequestBodyLimit = 64 * 1024;

// ---- Start's checks: errors name the option at fault ------------------------

Status CheckReadable(std::string_view option, const std::string& path) {
  if (path.empty()) {
    return InvalidArgument(std::string(option), std::string(option) + " is required (a PEM file)");
  }
  std::ifstream file(path);
  if (!file) {
    return InvalidArgument(std::string(option), std::string(option) + " \"" + path +
                                                    "\" cannot be read: " + std::strerror(errno));
  }
  return Ok();
}

Error TlsSetupError(std::string_view option, const std::string& path, std::string_view expected,
                    const boost::system::error_code& error) {
  return InvalidArgument(std::string(option), std::string(option) + " \"" + path + "\" is not " +
                                                  std::string(expected) + ": " + error.message());
}

Result<ssl::context> MakeTlsContext(const LogServerOptions& options) {
  for (auto [option, path] :
       {std::pair{"cert_file", &options.cert_file}, std::pair{"key_file", &options.key_file},
        std::pair{"client_ca_file", &options.client_ca_file}}) {
    if (Status readable = CheckReadable(option, *path); !readable.ok()) return readable.error();
  }
  ssl::context tls(ssl::context::tls_server);
  tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                  ssl::context::single_dh_use);
  boost::system::error_code error;
  if (tls.use_certificate_chain_file(options.cert_file, error); error) {
    return TlsSetupError("cert_file", options.cert_file, "a PEM certificate", error);
  }
  // OpenSSL also checks here that the key belongs to the certificate.
  if (tls.use_private_key_file(options.key_file, ssl::context::pem, error); error) {
    return TlsSetupError("key_file", options.key_file,
                         "a PEM private key matching cert_file \"" + options.cert_file + "\"",
                         error);
  }
  if (tls.load_verify_file(options.client_ca_file, error); error) {
    return TlsSetupError("client_ca_file", options.client_ca_file, "a PEM CA certificate", error);
  }
  // Name the acceptable issuers in the handshake, so a client holding several
  // certificates (curl, a browser) offers the right one.
  if (STACK_OF(X509_NAME)* issuers = SSL_load_client_CA_file(options.client_ca_file.c_str())) {
    SSL_CTX_set_client_CA_list(tls.native_handle(), issuers);
  }
  // Only the API server (its --kubelet-client-certificate) may read logs.
  tls.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return tls;
}

// ---- HTTP answers ----------------------------------------------------------

http::status StatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotFound:
      return http::status::not_found;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return http::status::bad_request;
    default:
      return http::status::internal_server_error;
  }
}

std::string NotSupportedMessage(const std::string& feature) {
  if (feature == "portForward") {
    return "port-forward is not supported by fulcrum-local-node: its pods are local processes, "
           "each "
           "listening on its own loopback address; connect to the pod's IP (kubectl get pod -o "
           "wide) "
           "directly from this host";
  }
  return feature +
         " is not supported by fulcrum-local-node: its pods are local processes on the node's "
         "host, not containers it can enter or attach to; work with the processes on that host "
         "directly (kubectl logs works)";
}

// Writes a whole response with the given body.
bool WriteBody(TlsStream& stream, const Request& request, http::status status,
               const char* content_type, std::string body, const char* allow = nullptr) {
  http::response<http::string_body> response{status, request.version()};
  response.set(http::field::server, "fulcrum-local-node");
  response.set(http::field::content_type, content_type);
  if (allow != nullptr) response.set(http::field::allow, allow);
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  boost::system::error_code error;
  http::write(stream, response, error);
  return !error;
}

// The API server shows the body of an error answer to the kubectl user, so it is the plain message.
bool WriteText(TlsStream& stream, const Request& request, http::status status, std::string body,
               const char* allow = nullptr) {
  return WriteBody(stream, request, status, "text/plain; charset=utf-8", std::move(body), allow);
}

// An error answer to a streaming request (exec, attach, port-forward) as a metav1.Status:
// kubectl decodes the body the API server relays as a Status, and plain text with a ": " in
// it would decode, as YAML, to an empty one.
bool WriteStatus(TlsStream& stream, const Request& request, http::status status,
                 const std::string& message) {
  const nlohmann::json body = {{"kind", "Status"},           {"apiVersion", "v1"},
                               {"status", "Failure"},        {"message", message},
                               {"reason", "NotImplemented"}, {"code", static_cast<int>(status)}};
  return WriteBody(stream, request, status, "application/json", body.dump());
}

// A 200 response whose body is sent as it is read: chunked for HTTP/1.1, so
// every piece reaches the client at once and the end is explicit; raw until the
// connection closes for HTTP/1.0, which has no chunks.
class StreamedBody {
 public:
  StreamedBody(TlsStream& stream, const Request& request)
      : stream_(stream),
        chunked_(request.version() >= 11),
        keep_alive_(request.keep_alive() && chunked_) {}

  bool keep_alive() const { return keep_alive_; }

  bool WriteHeader() {
    http::response<http::empty_body> response{http::status::ok, chunked_ ? 11u : 10u};
    response.set(http::field::server, "fulcrum-local-node");
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.set(http::field::cache_control, "no-cache");
    response.keep_alive(keep_alive_);
    response.chunked(chunked_);
    http::response_serializer<http::empty_body> serializer{response};
    boost::system::error_code error;
    http::write_header(stream_, serializer, error);
    return !error;
  }

  bool Write(std::string_view data) {
    if (data.empty()) return true;  // an empty chunk would end the response
    boost::system::error_code error;
    if (chunked_) {
      net::write(stream_, http::make_chunk(net::buffer(data.data(), data.size())), error);
    } else {
      net::write(stream_, net::buffer(data.data(), data.size()), error);
    }
    return !error;
  }

  bool Finish() {
    if (!chunked_) return true;
    boost::system::error_code error;
    net::write(stream_, http::make_chunk_last(), error);
    return !error;
  }

 private:
  TlsStream& stream_;
  bool chunked_;
  bool keep_alive_;
};

// True once the client has closed its end: a follow that is waiting for more
// data would otherwise only notice at its next write, which may be never.
bool PeerHungUp(int fd) {
  pollfd watched{fd, POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool IsQuietDisconnect(const boost::system::error_code& error) {
  return error == http::error::end_of_stream || error == net::error::eof ||
         error == ssl::error::stream_truncated || error == net::error::connection_reset ||
         error == net::error::broken_pipe;
}

// ---- The server ------------------------------------------------------------

class LogServerImpl final : public LogServer {
 public:
  LogServerImpl(std::shared_ptr<const LogDirectory> directory, ssl::context tls)
      : directory_(std::move(directory)), tls_(std::move(tls)) {}

  ~LogServerImpl() override { Stop(); }

  int port() const override { return port_; }

  Status Listen(const LogServerOptions& options) {
    if (options.port < 0 || options.port > 65535) {
      return InvalidArgument(
          "port", "port must be 0 (any free port) to 65535, got " + std::to_string(options.port));
    }
    boost::system::error_code error;
    const net::ip::address address = net::ip::make_address(options.address, error);
    if (error) {
      return InvalidArgument("address", "address \"" + options.address +
                                            "\" is not an IP address: " + error.message());
    }
    const tcp::endpoint endpoint{address, static_cast<unsigned short>(options.port)};
    const std::string where = options.address + ":" + std::to_string(options.port);
    if (acceptor_.open(endpoint.protocol(), error); error) {
      return MakeError(ErrorCode::kInternal,
                       "cannot open a socket for " + where + ": " + error.message());
    }
    // Lets a restarted agent take its port back while old connections linger in
    // TIME_WAIT; a port another process listens on still fails to bind.
    acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
    if (acceptor_.bind(endpoint, error); error) {
      if (error == net::error::address_in_use) {
        return Error{ErrorCode::kFailedPrecondition,
                     "port " + std::to_string(options.port) + " on " + options.address +
                         " is already in use; choose another port or stop what listens there",
                     "port"};
      }
      // EADDRNOTAVAIL: the address is not one of this host's.
      const bool address_fault = error.value() == EADDRNOTAVAIL;
      return Error{ErrorCode::kFailedPrecondition,
                   "cannot listen on " + where + " (" + (address_fault ? "address" : "port") +
                       "): " + error.message(),
                   address_fault ? "address" : "port"};
    }
    if (acceptor_.listen(net::socket_base::max_listen_connections, error); error) {
      return Error{ErrorCode::kFailedPrecondition,
                   "cannot listen on " + where + ": " + error.message(), "port"};
    }
    port_ = acceptor_.local_endpoint().port();
    return Ok();
  }

  void StartAccepting() {
    Accept();
    acceptor_thread_ = std::thread([this] { io_.run(); });
    log_.Info("serving container logs", {{"port", port_}});
  }

 private:
  // One client connection, served on its own thread. `fd` stays valid while it
  // is registered here (the thread unregisters it under the mutex before closing
  // it), so Stop can shut the socket down without racing a reuse of the number.
  struct Connection {
    std::thread thread;
    int fd = -1;
    bool finished = false;
  };

  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
      if (error == net::error::operation_aborted) return;
      if (error) {
        // Out of descriptors and the like: back off rather than spin.
        log_.Warning("cannot accept a connection; retrying", {{"error", error.message()}});
        accept_retry_.expires_after(kAcceptRetryDelay);
        accept_retry_.async_wait([this](const boost::system::error_code& timer_error) {
          if (!timer_error) Accept();
        });
        return;
      }
      OnAccepted(std::move(socket));
      Accept();
    });
  }

  void OnAccepted(tcp::socket socket) {
    std::lock_guard lock(mutex_);
    // Finished threads have set `finished` as their last act under this lock,
    // so joining them here waits for no more than their return.
    std::erase_if(connections_, [](Connection& connection) {
      if (!connection.finished) return false;
      connection.thread.join();
      return true;
    });
    if (stopping_) return;  // the socket closes as it goes out of scope
    Connection& connection = connections_.emplace_back();
    connection.fd = socket.native_handle();
    try {
      connection.thread =
          std::thread(&LogServerImpl::Serve, this, std::ref(connection), std::move(socket));
    } catch (const std::system_error& error) {
      log_.Warning("cannot start a thread for a connection; dropping it",
                   {{"error", error.what()}});
      connections_.pop_back();
    }
  }

  void Serve(Connection& connection, tcp::socket socket) {
    boost::system::error_code error;
    socket.set_option(tcp::no_delay(true), error);  // a follow's small chunks go out at once
    const tcp::endpoint peer_endpoint = socket.remote_endpoint(error);
    const std::string peer =
        error ? std::string("unknown peer")
              : peer_endpoint.address().to_string() + ":" + std::to_string(peer_endpoint.port());
    TlsStream stream(std::move(socket), tls_);
    if (stream.handshake(ssl::stream_base::server, error); error) {
      // Typically a client without a certificate from client_ca_file.
      if (!Stopping()) {
        log_.Warning("TLS handshake failed", {{"peer", peer}, {"error", error.message()}});
      }
    } else if (ServeRequests(stream, peer)) {
      CloseTls(stream);
    }
    std::lock_guard lock(mutex_);
    connection.fd = -1;
    stream.next_layer().close(error);
    connection.finished = true;
    changed_.notify_all();
  }

  // Answers requests until the client or this server ends the connection.
  // Returns true when the connection is still sound enough for a TLS goodbye.
  bool ServeRequests(TlsStream& stream, const std::string& peer) {
    boost::beast::flat_buffer buffer;
    while (!Stopping()) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(kRequestBodyLimit);
      boost::system::error_code error;
      http::read(stream, buffer, parser, error);
      if (error) {
        if (IsQuietDisconnect(error) || Stopping()) return false;
        log_.Warning("bad request", {{"peer", peer}, {"error", error.message()}});
        Request placeholder{http::verb::get, "/", 11};
        placeholder.keep_alive(false);
        return WriteText(stream, placeholder, http::status::bad_request,
                         "malformed HTTP request: " + error.message());
      }
      const Request& request = parser.get();
      log_.Debug("request", {{"peer", peer},
                             {"method", std::string(request.method_string())},
                             {"target", std::string(request.target())}});
      if (!Answer(stream, request) || !request.keep_alive()) return true;
    }
    return true;
  }

  // Returns false when the connection cannot carry another request.
  bool Answer(TlsStream& stream, const Request& request) {
    const std::string_view raw_target(request.target().data(), request.target().size());
    Result<RequestTarget> target = ParseRequestTarget(raw_target);
    if (!target.ok()) {
      return WriteText(stream, request, http::status::bad_request, target.error().message);
    }
    // exec and attach arrive as POST upgrade requests: they get the sentence saying why not,
    // whatever their method.
    if (target->kind == RequestTarget::Kind::kNotSupported) {
      return WriteStatus(stream, request, http::status::not_implemented,
                         NotSupportedMessage(target->feature));
    }
    if (request.method() != http::verb::get) {
      return WriteText(stream, request, http::status::method_not_allowed,
                       "fulcrum-local-node serves GET only", "GET");
    }
    switch (target->kind) {
      case RequestTarget::Kind::kHealth:
        return WriteText(stream, request, http::status::ok, "ok");
      case RequestTarget::Kind::kNotSupported:
        return WriteText(stream, request, http::status::not_implemented,
                         NotSupportedMessage(target->feature));
      case RequestTarget::Kind::kContainerLogs:
        return ServeLogs(stream, request, target->logs);
      case RequestTarget::Kind::kUnknown:
        break;
    }
    const std::string_view path = raw_target.substr(0, raw_target.find('?'));
    return WriteText(stream, request, http::status::not_found,
                     "fulcrum-local-node has no endpoint " + std::string(path) +
                         "; it serves /containerLogs/{namespace}/{pod}/{container} and /healthz");
  }

  bool ServeLogs(TlsStream& stream, const Request& request, const LogRequest& logs) {
    Result<LogLocation> location = directory_->Find(logs);
    if (!location.ok()) {
      return WriteText(stream, request, StatusFor(location.error().code), location.error().message);
    }
    LogFileReader file(location->file);
    if (logs.tail_lines) {
      if (Status sought = file.SeekToLastLines(*logs.tail_lines); !sought.ok()) {
        return WriteText(stream, request, http::status::internal_server_error,
                         sought.error().message);
      }
    }
    StreamedBody body(stream, request);
    if (!body.WriteHeader()) return false;

    std::int64_t remaining = logs.limit_bytes.value_or(std::numeric_limits<std::int64_t>::max());
    // Sends everything the file holds now, up to the limit. False when the
    // response cannot go on: the client is gone or the file cannot be read (the
    // response is then cut short, so the client sees it is incomplete).
    const auto send_what_is_there = [&]() {
      std::string chunk;
      while (remaining > 0) {
        chunk.clear();
        const std::size_t wanted =
            static_cast<std::size_t>(std::min<std::int64_t>(remaining, kChunkBytes));
        Result<std::size_t> read = file.Read(chunk, wanted);
        if (!read.ok()) {
          log_.Warning("cannot read a container log",
                       {{"file", location->file.string()}, {"error", read.error().message}});
          return false;
        }
        if (*read == 0) return true;
        remaining -= static_cast<std::int64_t>(*read);
        if (!body.Write(chunk)) return false;
      }
      return true;
    };

    if (!send_what_is_there()) return false;
    while (logs.follow && remaining > 0) {
      // Asked before draining, so whatever the container wrote before it ended is sent.
      const bool still_writing = location->still_writing && location->still_writing();
      if (!send_what_is_there()) return false;
      if (!still_writing) break;
      if (PeerHungUp(stream.next_layer().native_handle()) && !Stopping()) {
        log_.Debug("client left a follow", {{"file", location->file.string()}});
        return false;
      }
      if (WaitForStop(kFollowPollInterval)) break;  // ends the response cleanly
    }
    return body.Finish() && body.keep_alive();
  }

  // Sends close_notify without waiting for the client's: shutting our read side
  // first makes OpenSSL's wait for the reply end at once, so a client that
  // never answers cannot hold the thread.
  static void CloseTls(TlsStream& stream) {
    boost::system::error_code error;
    stream.next_layer().shutdown(tcp::socket::shutdown_receive, error);
    stream.shutdown(error);
  }

  bool Stopping() {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  // Sleeps up to `duration`; true as soon as the server is stopping.
  bool WaitForStop(std::chrono::milliseconds duration) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, duration, [this] { return stopping_; });
  }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      // Reads see end-of-stream (a connection idle between requests ends now);
      // writes still work, so follows can end their response properly.
      for (Connection& connection : connections_) {
        if (connection.fd >= 0) ::shutdown(connection.fd, SHUT_RD);
      }
    }
    changed_.notify_all();
    io_.stop();
    if (acceptor_thread_.joinable()) acceptor_thread_.join();
    {
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, kStopGrace, [this] {
        return std::all_of(connections_.begin(), connections_.end(),
                           [](const Connection& connection) { return connection.finished; });
      });
      // A client that stopped reading keeps a write blocked; this ends it.
      for (Connection& connection : connections_) {
        if (connection.fd >= 0) ::shutdown(connection.fd, SHUT_RDWR);
      }
    }
    for (Connection& connection : connections_) {
      if (connection.thread.joinable()) connection.thread.join();
    }
    if (port_ != 0) log_.Info("stopped serving container logs", {{"port", port_}});
  }

  const std::shared_ptr<const LogDirectory> directory_;
  const log::Logger log_{"local-node.logs"};
  net::io_context io_;  // runs the acceptor only; connections use blocking calls on their threads
  ssl::context tls_;
  tcp::acceptor acceptor_{io_};
  net::steady_timer accept_retry_{io_};
  int port_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;  // stopping_ set, or a connection finished
  bool stopping_ = false;
  std::list<Connection> connections_;  // a list: threads hold references to their entry
  std::thread acceptor_thread_;
};

}  // namespace

Result<std::unique_ptr<LogServer>> LogServer::Start(const LogServerOptions& options,
                                                    std::shared_ptr<const LogDirectory> directory) {
  if (!directory) return InvalidArgument("directory", "a LogDirectory is required");
  Result<ssl::context> tls = MakeTlsContext(options);
  if (!tls.ok()) return tls.error();
  auto server = std::make_unique<LogServerImpl>(std::move(directory), std::move(tls).value());
  if (Status listening = server->Listen(options); !listening.ok()) return listening.error();
  server->StartAccepting();
  return std::unique_ptr<LogServer>(std::move(server));
}

}  // namespace fulcrum::local_node
