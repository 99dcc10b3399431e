#include "common/http_endpoints.h"

#include <arpa/inet.h>
#include <cpprest/http_listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <utility>

namespace fulcrum {
namespace {

using web::http::http_request;
using web::http::http_response;
using web::http::status_code;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;

struct ListenAddress {
  std::string host;
  int port = 0;
};

Result<ListenAddress> ParseListen(const std::string& listen, const std::string& setting) {
  const std::size_t colon = listen.rfind(':');
  int port = -1;
  bool parsed = false;
  if (colon != std::string::npos) {
    const char* begin = listen.data() + colon + 1;
    const char* end = listen.data() + listen.size();
    const auto [rest, error] = std::from_chars(begin, end, port);
    parsed = begin != end && rest == end && error == std::errc();
  }
  if (!parsed || port < 0 || port > 65535) {
    return InvalidArgument(
        setting,
        "expected HOST:PORT with a port in 0..65535 (0: any free), got \"" + listen + "\"");
  }
  ListenAddress address{listen.substr(0, colon), port};
  if (address.host.empty()) address.host = "0.0.0.0";  // the operator's convention: every interface
  return address;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// cpprestsdk's listener binds port 0 like any other but has no way to say which port it got, so
// for port 0 we ask the kernel for a free one with a socket of our own, close it, and listen
// there. Another process may take the port in between; Start retries for that.
Result<int> FreePort(const std::string& host) {
  std::string bare = host;  // getaddrinfo wants an IPv6 literal without its URI brackets
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(bare.c_str(), "0", &hints, &found); rc != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot resolve host \"" + host + "\": " + ::gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  const FileDescriptor socket(::socket(found->ai_family, found->ai_socktype, found->ai_protocol));
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (socket.get() < 0 || ::bind(socket.get(), found->ai_addr, found->ai_addrlen) != 0 ||
      ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "cannot find a free port on " + host + ": " + std::strerror(errno));
  }
  const in_port_t port = bound.ss_family == AF_INET6
                             ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                             : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port;
  return static_cast<int>(ntohs(port));
}

http_response TextResponse(status_code code, const std::string& body) {
  http_response response(code);
  response.set_body(body, "text/plain; charset=utf-8");
  return response;
}

http_response ProbeResponse(const std::function<Status()>& probe) {
  const Status status = probe();
  return status.ok() ? TextResponse(status_codes::OK, "ok")
                     : TextResponse(status_codes::InternalError, status.error().message);
}

}  // namespace

struct HttpEndpoints::Impl {
  Probes probes;
  std::function<std::string()> metrics_text;
  int port = 0;
  std::unique_ptr<http_listener> listener;  // last: closed before the functions it calls go

  http_response Answer(const http_request& request) const {
    const std::string path = request.request_uri().path();
    const bool served = (path == "/healthz" && probes.healthy) ||
                        (path == "/readyz" && probes.ready) || (path == "/metrics" && metrics_text);
    if (!served) return TextResponse(status_codes::NotFound, "not found: " + path);
    if (request.method() != web::http::methods::GET) {
      http_response response = TextResponse(status_codes::MethodNotAllowed, "only GET");
      response.headers().add(web::http::header_names::allow, web::http::methods::GET);
      return response;
    }
    try {
      if (path == "/healthz") return ProbeResponse(probes.healthy);
      if (path == "/readyz") return ProbeResponse(probes.ready);
      http_response response(status_codes::OK);
      // The text format's version, which Prometheus reads from the content type.
      response.set_body(metrics_text(), "text/plain; version=0.0.4");
      return response;
    } catch (const std::exception& error) {
      // A throwing probe or collector must not take the server down; the request just fails.
      return TextResponse(status_codes::InternalError, error.what());
    }
  }
};

HttpEndpoints::HttpEndpoints(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpEndpoints::~HttpEndpoints() {
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
    // Nothing left to do with a listener that fails to close while we shut down.
  }
}

int HttpEndpoints::port() const {
  return impl_->port;
}

Result<std::unique_ptr<HttpEndpoints>> HttpEndpoints::Start(
    const std::string& listen, Probes probes, std::function<std::string()> metrics_text,
    const std::string& setting_name) {
  Result<ListenAddress> address = ParseListen(listen, setting_name);
  if (!address.ok()) return address.error();
  auto impl = std::make_unique<Impl>();
  impl->probes = std::move(probes);
  impl->metrics_text = std::move(metrics_text);
  const Impl* answering = impl.get();

  // Only a port we picked ourselves can be lost to another process; a given one fails at once.
  const int attempts = address->port == 0 ? 5 : 1;
  std::string last_error;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    int port = address->port;
    if (port == 0) {
      Result<int> free = FreePort(address->host);
      if (!free.ok()) {
        return Error{free.error().code, free.error().message, setting_name};
      }
      port = *free;
    }
    const std::string url = "http://" + address->host + ":" + std::to_string(port);
    try {
      auto listener = std::make_unique<http_listener>(web::uri(url));
      listener->support([answering](http_request request) {
        request.reply(answering->Answer(request)).then([](pplx::task<void> sent) {
          try {
            sent.get();
          } catch (const std::exception&) {
            // The client went away before the answer; nothing to tell it.
          }
        });
      });
      listener->open().wait();
      impl->listener = std::move(listener);
      impl->port = port;
      return std::unique_ptr<HttpEndpoints>(new HttpEndpoints(std::move(impl)));
    } catch (const std::exception& error) {
      last_error = "cannot listen on " + url + ": " + error.what();
    }
  }
  return Error{ErrorCode::kFailedPrecondition, last_error, setting_name};
}

}  // namespace fulcrum
