// Sandbox escapes with the static rules OFF: native code tries to write files
// outside its directory, connect to a loopback port, read the daemon's secret
// from its own environment and from /proc/*/environ. Each must fail; the
// assertions are on observable effects, not on the verdict alone.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstring>

#include "tests/evaluator/eval_test_support.hpp"

namespace korch::evaluator::testing {
namespace {

constexpr const char* k_secret = "sk-korch-test-secret-0123456789";
// The port sandbox_connect.py names; the test listens on a port the kernel
// picks and puts it in the candidate's forward (the cache key is the native
// source's, so no recompile).
constexpr const char* k_corpus_port = "47811";

class SandboxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A secret in the daemon's environment, as an API key would be.
    setenv("KORCH_TEST_SECRET_KEY", k_secret, 1);
    auto ev = make_protected_evaluator(test_config(2, 60), k_cache_dir);
    ASSERT_TRUE(ev) << ev.error().message;
    s_ev = std::move(*ev);
  }
  static void TearDownTestSuite() {
    if (s_ev) s_ev->shutdown();
    s_ev.reset();
  }
  Report run(const std::string& file, const std::string& port = "") {
    auto f = read_corpus(k_source_dir + "/tests/evaluator/corpus/hacks/" + file + ".py");
    if (!port.empty()) {
      const auto at = f.code.rfind(k_corpus_port);
      EXPECT_NE(at, std::string::npos) << file << " names no port";
      if (at != std::string::npos) f.code.replace(at, std::strlen(k_corpus_port), port);
    }
    EXPECT_FALSE(f.rules) << file << " must be a rules-off probe";
    auto task = task_by_stem(f.task);
    EXPECT_TRUE(task);
    Report r = submit(*s_ev, make_request(f, *task, Mode::submit)).get();
    EXPECT_TRUE(r.rules_skipped);
    // No secret anywhere in what comes back.
    EXPECT_EQ(r.to_json().find(k_secret), std::string::npos) << file;
    EXPECT_EQ(r.to_json().find("sk-korch-test-secret"), std::string::npos) << file;
    return r;
  }
  static inline std::unique_ptr<Evaluator> s_ev;
};

TEST_F(SandboxTest, ReportsItsProtections) {
  Report r = run("sandbox_getenv");
  for (const char* p :
       {"pid_ns", "mount_ns", "net_ns", "ipc_ns", "uid_nobody", "no_new_privs", "seccomp",
        "rlimit_as", "no_core", "pdeathsig", "private_proc", "private_tmp", "env_whitelist"}) {
    EXPECT_NE(std::find(r.protections.begin(), r.protections.end(), p), r.protections.end())
        << "missing protection " << p;
  }
}

TEST_F(SandboxTest, OwnEnvironmentHoldsNoSecret) {
  Report r = run("sandbox_getenv");
  EXPECT_EQ(r.status, Verdict::ok) << r.error << r.runtime_detail;
}

TEST_F(SandboxTest, ProcEnvironScanFindsNoSecret) {
  Report r = run("sandbox_scan_environ");
  EXPECT_EQ(r.status, Verdict::ok) << r.error << r.runtime_detail;
  EXPECT_EQ(r.runtime_detail.find("LEAK"), std::string::npos);
}

TEST_F(SandboxTest, PythonProcScanFindsNoSecret) {
  Report r = run("sandbox_py_proc");
  EXPECT_EQ(r.status, Verdict::ok) << r.error << r.runtime_detail;
}

TEST_F(SandboxTest, CannotWriteOutsideItsDirectory) {
  const char* markers[] = {"/tmp/korch-escape-marker", "/var/tmp/korch-escape-marker",
                           "/dev/shm/korch-escape-marker", "/work/korch-escape-marker"};
  for (auto m : markers) unlink(m);
  Report r = run("sandbox_write_file");
  EXPECT_EQ(r.status, Verdict::ok) << r.error << r.runtime_detail;
  for (auto m : markers) EXPECT_FALSE(std::filesystem::exists(m)) << m << " was created";
}

TEST_F(SandboxTest, CannotConnectToLoopback) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(fd, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;  // the kernel picks a free port
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  Report r = run("sandbox_connect", std::to_string(ntohs(a.sin_port)));
  EXPECT_EQ(r.status, Verdict::ok) << r.error << r.runtime_detail;
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0) << "the candidate connected to the loopback listener";
  close(fd);
}

}  // namespace
}  // namespace korch::evaluator::testing
