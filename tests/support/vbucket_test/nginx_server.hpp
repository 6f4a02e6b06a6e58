#pragma once
/// A loopback nginx for the tests and benchmarks that read media over HTTP: started as a child
/// of this process (`daemon off`, as the current user) from a generated nginx.conf in a
/// temporary prefix, on a free port of 127.0.0.1, serving a directory with range support.
/// `find_nginx()` is empty where nginx is not installed (Debian: nginx): skip with a message.

#include <arpa/inet.h>   // htonl, htons, ntohs
#include <netinet/in.h>  // sockaddr_in
#include <signal.h>      // kill, SIGTERM
#include <sys/socket.h>  // socket, bind, connect
#include <sys/wait.h>    // waitpid
#include <unistd.h>      // fork, execv, access, geteuid

#include <chrono>      // std::chrono::milliseconds
#include <cstdint>     // std::uint16_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <optional>    // std::optional
#include <stdexcept>   // std::runtime_error
#include <string>      // std::string
#include <thread>      // std::this_thread::sleep_for
#include <utility>     // std::move

namespace vbucket_test {

/// The nginx binary, if installed.
inline std::optional<std::string> find_nginx() {
  for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"})
    if (::access(p, X_OK) == 0) return std::string(p);
  return std::nullopt;
}

/// A TCP port of 127.0.0.1 that nothing listens on now.
inline int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(s);
  if (!ok) throw std::runtime_error("free_port: cannot bind a socket on 127.0.0.1");
  return ntohs(a.sin_port);
}

/// Whether something accepts connections on 127.0.0.1:`port`.
inline bool accepts(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

/// nginx in the foreground, a child of this process, serving `root` (its prefix is
/// `root/nginx`). `locations`: extra nginx `location` blocks of the server (fault injection:
/// `limit_rate`, `return 503`, ...). `stop()` and `start()` again keep the port.
class nginx_server {
 public:
  nginx_server(std::string binary, const std::filesystem::path& root,
               const std::string& locations = "")
      : binary_(std::move(binary)), prefix_(root / "nginx"), port_(free_port()) {
    std::filesystem::create_directories(prefix_ / "logs");
    const std::string r = root.string(), p = prefix_.string();
    std::ofstream conf(prefix_ / "nginx.conf");
    conf << "daemon off;\nmaster_process off;\nworker_processes 1;\npid " << p
         << "/nginx.pid;\nerror_log " << p << "/logs/error.log;\n"
         << (::geteuid() == 0 ? "user root;\n" : "") << "events { worker_connections 64; }\n"
         << "http {\n  access_log off;\n  default_type application/octet-stream;\n";
    for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
      conf << "  " << t << "_temp_path " << p << "/" << t << ";\n";
    conf << "  server {\n    listen 127.0.0.1:" << port_ << ";\n    root " << r << ";\n"
         << locations << "  }\n}\n";
    conf.close();
    start();
  }
  nginx_server(const nginx_server&) = delete;
  nginx_server& operator=(const nginx_server&) = delete;
  ~nginx_server() { stop(); }

  /// Starts the server and waits (up to 5 s) until it accepts connections; throws
  /// std::runtime_error naming its error log when it does not.
  void start() {
    const std::string conf = (prefix_ / "nginx.conf").string(), p = prefix_.string();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("nginx_server: fork failed");
    if (pid_ == 0) {
      const char* argv[] = {binary_.c_str(), "-p", p.c_str(), "-c", conf.c_str(), nullptr};
      ::execv(binary_.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !accepts(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!accepts(port_))
      throw std::runtime_error("nginx did not start; see " + p + "/logs/error.log");
  }
  /// Stops the server (SIGTERM) and waits for it.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  [[nodiscard]] int port() const noexcept { return port_; }
  /// The URL of `path` (relative to the served root).
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
  }

 private:
  std::string binary_;
  std::filesystem::path prefix_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace vbucket_test
