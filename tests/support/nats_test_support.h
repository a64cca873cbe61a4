// Shared fixtures of the bus module's tests (src/bus/*_test.cc): a real
// JetStream-enabled nats-server started and stopped by the test on a loopback
// port, with its own store directory, and the loopback port helpers it uses.
//
// Header-only: each test binary includes it once.
//
// Thread safety: FreePort from any thread (it locks); a NatsServer belongs to
// the test thread that made it.
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mb::bus::testing {

// The nats-server program, or "" when it is not installed.
inline std::string NatsServerBinary() {
  for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// A loopback port free now and not handed out before in this process (the
// kernel may give a just-closed port again, and a cluster needs six).
inline uint16_t FreePort() {
  static std::mutex mu;
  static std::set<uint16_t> given;
  std::lock_guard<std::mutex> lock(mu);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    if (given.insert(ntohs(a.sin_port)).second) return ntohs(a.sin_port);
  }
}

// True when something accepts connections on the loopback port.
inline bool Accepts(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// One JetStream-enabled nats-server on a loopback port; Stop and Start again
// keep its port and its store (a restart). `extra`: more arguments (a
// cluster's name and routes).
class NatsServer {
 public:
  explicit NatsServer(std::filesystem::path dir, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), port_(FreePort()), extra_(std::move(extra)) {}
  ~NatsServer() { Stop(SIGKILL); }
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  void Start() {
    using namespace std::chrono_literals;
    const std::string bin = NatsServerBinary();
    ASSERT_FALSE(bin.empty()) << "nats-server is not installed (scripts/bootstrap.sh installs it)";
    const std::string log = (dir_ / "nats.log").string();
    std::vector<std::string> args = {bin,   "-js",
                                     "-a",  "127.0.0.1",
                                     "-p",  std::to_string(port_),
                                     "-sd", (dir_ / "store").string(),
                                     "-l",  log};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !Accepts(port_); ++i) std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(Accepts(port_)) << "nats-server did not start; see " << log;
  }
  void Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  std::string url() const { return fmt::format("nats://127.0.0.1:{}", port_); }
  uint16_t port() const { return port_; }

 private:
  std::filesystem::path dir_;
  uint16_t port_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace mb::bus::testing
