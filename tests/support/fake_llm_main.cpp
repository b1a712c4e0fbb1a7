// korch-fake-llm: the scripted fake OpenAI-compatible server as its own
// process, for integration tests (kill -9 resume) and the README demo.
//   korch-fake-llm [--port N] [--script kernel|refine|replay:FILE] [--latency-ms N]
//                  [--fault-rate P] [--seed S] [--host H] [--threads N]
// Prints "PORT <n>" as its first stdout line (flushed) once /health answers,
// then serves until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "tests/support/fake_openai_server.hpp"
#include "tests/support/scripted_replies.hpp"

namespace {

void usage() {
  std::fprintf(
      stderr,
      "usage: korch-fake-llm [--port N] [--script kernel|refine|replay:FILE] [--latency-ms N]\n"
      "                      [--fault-rate P] [--seed S] [--host H] [--threads N]\n"
      "                      [--log FILE]\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace korch::testing;
  FakeServerOptions options;
  std::string script = "kernel";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "korch-fake-llm: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (arg == "--port")
        options.port = std::stoi(value());
      else if (arg == "--script")
        script = value();
      else if (arg == "--latency-ms")
        options.latency = std::chrono::milliseconds(std::stol(value()));
      else if (arg == "--fault-rate")
        options.faults.rate = std::stod(value());
      else if (arg == "--seed")
        options.faults.seed = std::stoull(value());
      else if (arg == "--host")
        options.host = value();
      else if (arg == "--threads")
        options.threads = std::stoi(value());
      else if (arg == "--log")
        options.request_log = value();
      else if (arg == "--help" || arg == "-h") {
        usage();
        return 0;
      } else {
        std::fprintf(stderr, "korch-fake-llm: unknown flag %s\n", argv[i]);
        usage();
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "korch-fake-llm: bad value for %s\n", argv[i - 1]);
      return 2;
    }
  }

  if (script == "kernel") {
    options.reply = kernel_script_reply;
  } else if (script == "refine") {
    options.reply_with_id = [](const std::string& model,
                               const std::vector<korch::llm::Message>& messages,
                               const std::string& request_id) {
      return refine_script_reply(model, messages, request_id);
    };
  } else if (script.starts_with("replay:")) {
    auto loaded = ReplayScript::load(script.substr(7));
    if (!loaded) {
      std::fprintf(stderr, "korch-fake-llm: %s\n", loaded.error().message.c_str());
      return 2;
    }
    auto replay = std::make_shared<ReplayScript>(std::move(*loaded));
    options.reply_with_id = [replay](const std::string& model,
                                     const std::vector<korch::llm::Message>& messages,
                                     const std::string& request_id) {
      return replay->reply(model, messages, request_id);
    };
  } else {
    std::fprintf(stderr, "korch-fake-llm: --script must be kernel, refine or replay:FILE\n");
    return 2;
  }

  // Block the stop signals before any thread starts, then wait for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  FakeOpenAIServer server(options);
  if (auto started = server.start(); !started) {
    std::fprintf(stderr, "korch-fake-llm: %s\n", started.error().message.c_str());
    return 1;
  }
  std::printf("PORT %d\n", server.port());
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "korch-fake-llm: serving %s (script %s, latency %lld ms, fault rate %.3f, seed %llu)\n",
      server.base_url().c_str(), script.c_str(), static_cast<long long>(options.latency.count()),
      options.faults.rate, static_cast<unsigned long long>(options.faults.seed));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  return 0;
}
