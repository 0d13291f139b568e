#include "evaluate.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <attngen/specialized.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attngen_mha_forward_cpu.h"
#include "reference.h"

namespace attngen::autotune {
namespace {

using Kernel = decltype(&attngen_mha_forward_cpu);
using Clock = std::chrono::steady_clock;

std::string quote(const std::string &s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

volatile std::sig_atomic_t stop_signal_received = 0;

enum class Waited { Exited, TimedOut, Stopped };

// Waits for a child until it exits, the time limit passes, or a stop is requested; in the last
// two cases kills it (its process group with `group`: a shell and what it started) and reaps it.
// Polls, so that a stop reaches it within a few milliseconds.
Waited wait_for(pid_t child, double timeout_seconds, bool group, int *status) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_seconds);
    for (;;) {
        const pid_t waited = waitpid(child, status, WNOHANG);
        if (waited == child) return Waited::Exited;
        const bool stop = stop_signal_received != 0;
        const bool late = Clock::now() > deadline;
        if ((waited < 0 && errno != EINTR) || stop || late) {
            kill(group ? -child : child, SIGKILL);
            while (waitpid(child, status, 0) < 0 && errno == EINTR) {
            }
            return stop ? Waited::Stopped : late ? Waited::TimedOut : Waited::Exited;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// A child that ran out of its limit or was stopped: the error, and whether it was cut short.
Result unfinished(Waited how, const Toolchain &tools) {
    Result r;
    if (how == Waited::Stopped) {
        r.error = "stopped by signal " + std::to_string(stop_signal_received);
        r.cut_short = true;
    } else {
        r.error = "timed out after " + std::to_string(int(std::ceil(tools.timeout_seconds))) +
                  " s" + (tools.budget_limited ? " (the end of the budget)" : "");
        r.cut_short = tools.budget_limited;
    }
    return r;
}

// Runs a shell command in a process group of its own (so that a time limit or a stop ends all
// of it), its output into `log`; ok, or what went wrong with the start of its output.
Result run(const std::string &command, const Toolchain &tools, const std::string &log) {
    Result r;
    const pid_t child = fork();
    if (child < 0) {
        r.error = std::string("fork failed: ") + std::strerror(errno);
        return r;
    }
    if (child == 0) {
        setpgid(0, 0);
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char *>(nullptr));
        _exit(127);
    }
    setpgid(child, child);  // also here: either call may run first
    int status = 0;
    const Waited how = wait_for(child, tools.timeout_seconds, true, &status);
    if (how != Waited::Exited) return unfinished(how, tools);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r.ok = true;
        return r;
    }
    std::string output;
    if (FILE *f = std::fopen(log.c_str(), "r")) {
        char buf[512];
        while (output.size() < 400 && std::fgets(buf, sizeof buf, f)) output += buf;
        std::fclose(f);
    }
    for (char &c : output) c = c == '\n' || c == '\t' ? ' ' : c;
    r.error = (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                   : "exit code " + std::to_string(WEXITSTATUS(status))) +
              ": " + output;
    return r;
}

std::vector<float> random_vector(size_t n, std::mt19937 &rng, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    std::vector<float> v(n);
    for (float &x : v) x = u(rng);
    return v;
}

struct Problem {
    int batch, q_len, kv_len, d_model, heads;
    attngen_mask mask{};
    std::vector<float> wq, wk, wv, wo, bias, query, key, value;

    Problem(int b, int q, int kv, int d, int h, bool causal, uint32_t seed)
        : batch(b), q_len(q), kv_len(kv), d_model(d), heads(h) {
        std::mt19937 rng(seed);
        const float bound = 1.0f / std::sqrt(float(d));
        for (auto *w : {&wq, &wk, &wv, &wo}) *w = random_vector(size_t(d) * d, rng, bound);
        bias = random_vector(d, rng, 0.5f);
        query = random_vector(size_t(b) * q * d, rng, 1.0f);
        key = random_vector(size_t(b) * kv * d, rng, 1.0f);
        value = random_vector(size_t(b) * kv * d, rng, 1.0f);
        mask.causal = causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    }

    int call(Kernel kernel, const specialized::MhaWeights &w, float *out) const {
        return specialized::forward(kernel, w, batch, q_len, kv_len, query.data(), key.data(),
                                    value.data(), &mask, out);
    }
    specialized::MhaWeights weights(attngen_device device) const {
        return specialized::MhaWeights(d_model, heads, d_model / heads, 0, 0, wq.data(), wk.data(),
                                       wv.data(), wo.data(), bias.data(), bias.data(), bias.data(),
                                       bias.data(), device);
    }
};

int reply_fd = -1;

// The candidate carries its own Halide runtime, whose default error handler would abort: its
// message becomes the candidate's error instead.
void report_halide_error(void *, const char *message) {
    const std::string reply = std::string("error Halide: ") + message;
    (void)!write(reply_fd, reply.data(), reply.size());
    _exit(0);
}

// In the child: check, then time. Writes "ok <ms>" or "error <why>" to fd.
void measure_in_child(const std::string &so, const Shape &shape, bool autoscheduled,
                      attngen_device device, int fd) {
    reply_fd = fd;
    const auto reply = [fd](const std::string &s) {
        (void)!write(fd, s.data(), s.size());
        _exit(0);
    };
    void *lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) reply(std::string("error dlopen: ") + dlerror());
    using SetHandler = void *(*)(void (*)(void *, const char *));
    if (auto set = reinterpret_cast<SetHandler>(dlsym(lib, "halide_set_error_handler"))) {
        set(report_halide_error);
    }
    const auto kernel = reinterpret_cast<Kernel>(dlsym(lib, "candidate"));
    if (kernel == nullptr) reply("error no symbol 'candidate'");

    // Correctness first, against float64, with the shape's mask: attngen's schedules on an
    // awkward small problem; an autoscheduler's on one the size it planned for (the
    // generator's estimates: heads of 64, 128 tokens), as smaller ones may be refused.
    const Problem small = autoscheduled ? Problem(1, 128, 128, 256, 4, shape.causal, 1)
                                        : Problem(2, 7, 9, 24, 3, shape.causal, 1);
    std::vector<float> out(size_t(small.batch) * small.q_len * small.d_model);
    if (small.call(kernel, small.weights(device), out.data()) != 0)
        reply("error kernel failed (check)");
    const attngen_mha_config config{
        small.d_model,         small.heads,       0, 0,   0, 1, ATTNGEN_DEVICE_CPU, 0, 0,
        ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE, 0, 0.0f};
    attngen_ref::MhaWeights rw;
    rw.wq = small.wq.data(), rw.wk = small.wk.data(), rw.wv = small.wv.data();
    rw.wo = small.wo.data(), rw.bq = rw.bk = rw.bv = rw.bo = small.bias.data();
    const attngen_ref::MhaResult ref =
        attngen_ref::mha(config, rw, small.batch, small.q_len, small.kv_len, small.query.data(),
                         small.key.data(), small.value.data(), &small.mask);
    for (size_t i = 0; i < out.size(); ++i) {
        // A schedule changes only the order of float sums: far below 1e-3 of these values.
        if (!(std::fabs(out[i] - ref.out[i]) <= 1e-3 * (1.0 + std::fabs(ref.out[i])))) {
            reply("error wrong result at " + std::to_string(i) + ": " + std::to_string(out[i]) +
                  " vs " + std::to_string(ref.out[i]));
        }
    }

    const Problem p(shape.batch, shape.q_len, shape.kv_len, shape.d_model, shape.heads,
                    shape.causal, 2);
    const specialized::MhaWeights w = p.weights(device);
    std::vector<float> big(size_t(p.batch) * p.q_len * p.d_model);
    if (p.call(kernel, w, big.data()) != 0) reply("error kernel failed (timing)");  // warm-up
    std::vector<double> ms;
    const auto start = Clock::now();
    while (ms.size() < 3 ||
           (ms.size() < 25 && Clock::now() - start < std::chrono::milliseconds(400))) {
        const auto t0 = Clock::now();
        p.call(kernel, w, big.data());
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    reply("ok " + std::to_string(ms[ms.size() / 2]));
}

}  // namespace

std::string plugin_path(const Toolchain &tools, const Candidate &candidate) {
    std::string lower = candidate.autoscheduler;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    return tools.plugin_dir + "/libautoschedule_" + lower + ".so";
}

Result build(const Toolchain &tools, const Candidate &candidate) {
    const std::string dir = tools.work_dir;
    std::string command = quote(tools.generator) + " -g attngen_mha_forward -o " + quote(dir) +
                          " -e object -f candidate";
    if (!candidate.autoscheduler.empty()) command += " -p " + quote(plugin_path(tools, candidate));
    command += " target=" + tools.target + "-user_context";
    for (const std::string &p : candidate.generator_params()) command += " " + p;
    command += " && " + quote(tools.compiler) + " -shared -Wl,-Bsymbolic -o " +
               quote(dir + "/candidate.so") + " " + quote(dir + "/candidate.o") + " -lpthread -ldl";
    Result r = run(command, tools, dir + "/build.log");
    if (!r.ok) r.error = "build failed: " + r.error;
    return r;
}

Result measure(const Toolchain &tools, const Candidate &candidate, const Shape &shape) {
    Result result;
    const std::string dir = tools.work_dir;
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) {
        result.error = "pipe failed";
        return result;
    }
    const pid_t child = fork();
    if (child < 0) {
        result.error = std::string("fork failed: ") + std::strerror(errno);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        return result;
    }
    if (child == 0) {
        close(pipe_fds[0]);
        // GPU kernels take their weights with the GPU's padding (layout.h).
        const attngen_device device =
            tools.target.find("cuda") != std::string::npos     ? ATTNGEN_DEVICE_CUDA
            : tools.target.find("opencl") != std::string::npos ? ATTNGEN_DEVICE_OPENCL
                                                               : ATTNGEN_DEVICE_CPU;
        measure_in_child(dir + "/candidate.so", shape, !candidate.autoscheduler.empty(), device,
                         pipe_fds[1]);
    }
    close(pipe_fds[1]);
    int status = 0;
    const Waited how = wait_for(child, tools.timeout_seconds, false, &status);
    if (how != Waited::Exited) {
        close(pipe_fds[0]);
        return unfinished(how, tools);
    }
    char buf[1024] = {};
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf - 1);
    close(pipe_fds[0]);
    const std::string reply = n > 0 ? std::string(buf, size_t(n)) : "";
    if (reply.rfind("ok ", 0) == 0) {
        result.ok = true;
        result.median_ms = std::stod(reply.substr(3));
    } else if (!reply.empty()) {
        result.error = reply.substr(6);
    } else {
        result.error = WIFSIGNALED(status)
                           ? "crashed (signal " + std::to_string(WTERMSIG(status)) + ")"
                           : "exited without a result";
    }
    return result;
}

void request_stop(int signal) {
    stop_signal_received = signal;
}

int stop_signal() {
    return stop_signal_received;
}

}  // namespace attngen::autotune
