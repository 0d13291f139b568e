// attngen-autotune: searches the schedule knobs of the fused MHA forward for one Halide target
// and a set of shapes, with Halide's autoschedulers as candidates too, and writes the winners
// to a JSON file the build reads (cmake/AttngenTunedParams.cmake). Every candidate is checked
// against the float64 reference before its time counts; every finished measurement is logged
// (measurement_log.h), so a stopped search resumes. See README, "Tuning".
//
//   attngen-autotune --target host --shapes bert-128,tutorial --budget 600
//                    --out generators/tuned/x86-64-linux.json --seed 1
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "evaluate.h"
#include "measurement_log.h"
#include "search_space.h"
#include "shapes.h"

namespace {

// The build_shape entry of a search over several shapes: the knobs best over all of them.
const std::string kAllShapes = "all_shapes";

using namespace attngen::autotune;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
// Keeps the keys in the order written, so shape classes stay in the order given.
using Json = nlohmann::ordered_json;

struct Options {
    std::string target = "host";
    std::string shapes = "bert-128";
    double budget_seconds = 300;
    std::string out;
    std::string log;  // default: <out>.log
    uint32_t seed = 1;
    size_t random_candidates = 200;
    std::string autoschedulers = "";  // default: by target family (see below)
    std::string tries;                // candidates measured right after the defaults, ';'-separated
    bool print_candidates = false;    // print the search order and stop
    Toolchain tools{ATTNGEN_GENERATOR_PATH, ATTNGEN_HALIDE_PLUGIN_DIR, "c++", "host", "", 180};
};

// What the command line gives, checked: the options, the shapes and the --try candidates.
struct Command {
    Options options;
    std::vector<Shape> shapes;
    std::vector<Candidate> tries;
};

// Halide's autoschedulers, as their plugins (libautoschedule_<lower case>.so) name them.
const std::vector<std::string> kAutoschedulers = {"Adams2019", "Anderson2021", "Li2018",
                                                  "Mullapudi2016"};

bool is_gpu_target(const std::string &target) {
    return target.find("cuda") != std::string::npos || target.find("opencl") != std::string::npos;
}

// A finite number of seconds greater than 0.
const CLI::Validator kPositiveSeconds(
    [](std::string &text) -> std::string {
        char *end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || !(value > 0)) {
            return "expected a positive number of seconds, got '" + text + "'";
        }
        return "";
    },
    "SECONDS>0");

// A decimal integer from 0 to max ("010" is ten, not octal eight as CLI11 alone would read it).
CLI::Validator decimal(uint64_t max) {
    return CLI::Validator(
        [max](std::string &text) -> std::string {
            errno = 0;
            const bool digits =
                !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
            const unsigned long long value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
            if (!digits || errno == ERANGE || value > max) {
                return "expected an integer from 0 to " + std::to_string(max) + ", got '" + text +
                       "'";
            }
            text = std::to_string(value);
            return "";
        },
        "0.." + std::to_string(max));
}

// Parses and checks the command line; prints --help or the fault and exits (status 2) itself.
Command parse(int argc, char **argv) {
    Command command;
    Options &o = command.options;
    std::string autoschedulers;
    CLI::App app(
        "Searches the schedule knobs of attngen's fused MHA forward for one Halide target and a "
        "set of shapes (Halide's autoschedulers as candidates too), checks each candidate against "
        "the float64 reference, and writes the winners to the JSON file the build reads.",
        "attngen-autotune");
    app.add_option("--out", o.out, "Output file (the tuned JSON the build reads)")
        ->required()
        ->type_name("FILE");
    app.add_option("--target", o.target, "host or a Halide target")
        ->type_name("TARGET")
        ->capture_default_str();
    app.add_option("--shapes", o.shapes,
                   "Named shapes of bench/ or B,Lq,Lkv,D,H[,causal], ';'-separated")
        ->type_name("SHAPES")
        ->capture_default_str();
    app.add_option("--budget", o.budget_seconds,
                   "Time limit of the search (a candidate it cuts short is not logged)")
        ->check(kPositiveSeconds)
        ->capture_default_str();
    app.add_option("--seed", o.seed, "Seed of the candidate order")
        ->check(decimal(std::numeric_limits<uint32_t>::max()))
        ->capture_default_str();
    app.add_option("--log", o.log, "Measurement log, to resume from (default: <out>.log)")
        ->type_name("FILE");
    app.add_option("--candidates", o.random_candidates, "Random knob settings to try")
        ->check(decimal(std::numeric_limits<uint32_t>::max()))
        ->capture_default_str();
    app.add_option("--autoschedulers", autoschedulers,
                   "Halide autoschedulers to try, A,B or none (default: by target family)")
        ->type_name("A,B|none");
    app.add_option("--generator", o.tools.generator, "The attngen_generators executable")
        ->type_name("PATH");
    app.add_option("--timeout", o.tools.timeout_seconds,
                   "Limit per candidate, for its build and its run each")
        ->check(kPositiveSeconds)
        ->capture_default_str();
    app.add_option("--try", o.tries, "Knob settings measured right after the defaults")
        ->type_name("K=V,K=V;...");
    app.add_flag("--print-candidates", o.print_candidates,
                 "Print the candidates in search order (one key a line) and stop");
    try {
        app.parse(argc, argv);
        try {
            command.shapes = parse_shapes(o.shapes);
        } catch (const std::invalid_argument &e) {
            throw CLI::ValidationError("--shapes", e.what());
        }
        for (const std::string &text : split(o.tries, ';')) {
            try {
                command.tries.push_back(parse_candidate(text, is_gpu_target(o.target)));
            } catch (const std::invalid_argument &e) {
                throw CLI::ValidationError("--try", e.what());
            }
        }
    } catch (const CLI::ParseError &e) {
        std::fprintf(stderr, "%s", e.get_exit_code() == 0 ? "" : "attngen-autotune: ");
        std::exit(app.exit(e) == 0 ? 0 : 2);
    }
    if (o.log.empty()) o.log = o.out + ".log";
    // Installed, the generator sits in <prefix>/libexec/attngen beside <prefix>/bin.
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    if (!error && o.tools.generator == ATTNGEN_GENERATOR_PATH) {
        const fs::path installed =
            self.parent_path() / ".." / "libexec" / "attngen" / "attngen_generators";
        if (access(installed.c_str(), X_OK) == 0) o.tools.generator = installed.string();
    }
    o.tools.target = o.target;
    if (app.count("--autoschedulers") > 0) {
        o.autoschedulers = autoschedulers == "none" ? "" : autoschedulers;
        for (const std::string &a : split(o.autoschedulers, ',')) {
            if (std::find(kAutoschedulers.begin(), kAutoschedulers.end(), a) ==
                kAutoschedulers.end()) {
                std::fprintf(stderr,
                             "attngen-autotune: --autoschedulers: unknown autoscheduler '%s' "
                             "(known: Adams2019, Anderson2021, Li2018, Mullapudi2016, or none)\n",
                             a.c_str());
                std::exit(2);
            }
        }
    } else {
        o.autoschedulers = is_gpu_target(o.target) ? "Anderson2021,Mullapudi2016,Li2018"
                                                   : "Mullapudi2016,Li2018,Adams2019";
    }
    return command;
}

// A scratch directory under the system's temporary directory, removed with its contents.
class ScratchDir {
  public:
    ScratchDir() {
        std::string name = (fs::temp_directory_path() / "attngen-autotune-XXXXXX").string();
        if (mkdtemp(name.data()) == nullptr) {
            throw fs::filesystem_error("cannot create a scratch directory", fs::path(name),
                                       std::error_code(errno, std::generic_category()));
        }
        path_ = name;
    }
    ~ScratchDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir &) = delete;
    ScratchDir &operator=(const ScratchDir &) = delete;
    const fs::path &path() const { return path_; }

  private:
    fs::path path_;
};

void progress(size_t done, size_t total, const std::pair<std::string, double> *best,
              double seconds_left) {
    const int width = 30;
    const int filled = total ? int(width * done / total) : width;
    std::fprintf(
        stderr, "\r[%s%s] %zu/%zu  best %s  %.0f s left   ",
        std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
        done, total,
        best != nullptr
            ? (std::to_string(best->second).substr(0, 6) + " ms (" + best->first + ")").c_str()
            : "-",
        seconds_left);
    std::fflush(stderr);
}

// A time in the file: milliseconds to the microsecond, as the log has them, or null.
Json json_ms(double ms) {
    return ms > 0 ? Json(std::round(ms * 1e6) / 1e6) : Json(nullptr);
}
Json json_ms(const Result *r) {
    return r != nullptr && r->ok ? json_ms(r->median_ms) : Json();
}

Json json_params(const Candidate &c) {
    Json params = Json::object();
    for (const auto &[name, value] : c.knobs) params[name] = value;
    return params;
}

// What stops a search before it starts, or "": a generator that cannot run, a missing
// autoscheduler plugin, an output that cannot be written. Each would otherwise cost the whole
// search (the output is written at its end) or log every candidate as a failure.
std::string environment_problem(const Options &o, const std::vector<Candidate> &order) {
    if (access(o.tools.generator.c_str(), X_OK) != 0) {
        return "the generator " + o.tools.generator + " cannot be run (" + std::strerror(errno) +
               "); --generator names it";
    }
    for (const Candidate &c : order) {
        if (c.autoscheduler.empty()) continue;
        const std::string plugin = plugin_path(o.tools, c);
        if (access(plugin.c_str(), R_OK) != 0) {
            return "the " + c.autoscheduler + " plugin " + plugin + " cannot be read (" +
                   std::strerror(errno) + ")";
        }
    }
    std::error_code error;
    if (fs::is_directory(o.out, error)) return "--out " + o.out + " is a directory";
    const fs::path dir =
        fs::path(o.out).parent_path().empty() ? fs::path(".") : fs::path(o.out).parent_path();
    std::string probe = (dir / ".attngen-autotune-XXXXXX").string();
    const int fd = mkstemp(probe.data());
    if (fd < 0) return "cannot write in " + dir.string() + " (" + std::strerror(errno) + ")";
    close(fd);
    fs::remove(probe, error);
    try {
        require_appendable(o.log);
    } catch (const std::runtime_error &e) {
        return e.what();
    }
    return "";
}

// Writes text to path through a file beside it renamed over it: a failure part way leaves the
// previous file whole. Throws std::runtime_error naming the file and the reason.
void write_replacing(const std::string &path, const std::string &text) {
    std::string temporary = path + ".tmp-XXXXXX";
    const int fd = mkstemp(temporary.data());
    if (fd < 0) {
        throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
    // mkstemp makes it private (0600); the file it replaces is an ordinary one.
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    size_t written = 0;
    while (written < text.size()) {
        const ssize_t n = write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        written += size_t(n);
    }
    const int saved = written == text.size() ? 0 : errno;
    if (close(fd) != 0 || saved != 0 || std::rename(temporary.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(saved != 0 ? saved : errno);
        std::remove(temporary.c_str());
        throw std::runtime_error("cannot write " + path + ": " + why);
    }
}

// Per entry of the file already at `path` for the same target, the knobs this search does not
// time (is_searched_knob) with their values, and the entry's `edited` note: kept, so that a
// rerun does not drop a value measured by hand (decode_split_keys, read by the decode kernels).
Json previous_entries(const std::string &path, const std::string &target, bool gpu) {
    Json kept = Json::object();
    std::ifstream in(path);
    if (!in) return kept;
    const Json previous = Json::parse(in, nullptr, false);
    if (previous.is_discarded() || !previous.is_object() ||
        previous.value("target", "") != target || !previous.contains("shapes") ||
        !previous["shapes"].is_object()) {
        return kept;
    }
    for (const auto &[name, entry] : previous["shapes"].items()) {
        if (!entry.is_object() || !entry.contains("params") || !entry["params"].is_object())
            continue;
        Json &k = kept[name] = Json::object();
        k["params"] = Json::object();
        for (const auto &[knob, value] : entry["params"].items()) {
            if (!is_searched_knob(knob, gpu)) k["params"][knob] = value;
        }
        for (const char *note : {"edited", "edited_in_previous_file"}) {
            if (entry.contains(note)) k["edited"] = entry[note];
        }
    }
    return kept;
}

// The previous file's knobs that this search does not time, added to an entry it writes.
void keep_unsearched(Json &entry, const Json &previous, const std::string &name) {
    if (!previous.contains(name)) return;
    const Json &p = previous[name];
    Json kept_names = Json::array();
    for (const auto &[knob, value] : p["params"].items()) {
        if (entry["params"].contains(knob)) continue;
        entry["params"][knob] = value;
        kept_names.push_back(knob);
    }
    if (!kept_names.empty()) entry["kept_from_previous_file"] = kept_names;
    if (p.contains("edited")) entry["edited_in_previous_file"] = p["edited"];
}

int tune(const Command &command) {
    Options o = command.options;
    const std::vector<Shape> &shapes = command.shapes;
    const bool gpu = is_gpu_target(o.target);
    std::vector<Candidate> order =
        candidates_in_order(o.seed, o.random_candidates, split(o.autoschedulers, ','), gpu);
    // Knob settings to try first (after the defaults), e.g. the current tuned file's.
    order.insert(order.begin() + 1, command.tries.begin(), command.tries.end());
    if (o.print_candidates) {
        for (const Candidate &c : order) std::printf("%s\n", c.key().c_str());
        return 0;
    }
    if (const std::string problem = environment_problem(o, order); !problem.empty()) {
        std::fprintf(stderr, "attngen-autotune: %s; nothing was measured\n", problem.c_str());
        return 1;
    }
    const ScratchDir work;
    o.tools.work_dir = work.path().string();

    Log log = read_log(o.log, o.target);
    const size_t total = order.size() * shapes.size();
    const auto start = Clock::now();
    const auto seconds_left = [&] {
        return o.budget_seconds - std::chrono::duration<double>(Clock::now() - start).count();
    };
    const auto out_of_time = [&] { return seconds_left() <= 0 || stop_signal() != 0; };
    size_t done = 0;
    std::map<std::string, std::pair<std::string, double>> best;  // shape -> (key, ms)
    for (const Candidate &c : order) {
        if (out_of_time()) break;
        const std::string key = c.key();
        std::optional<Result> built;  // built lazily: resumed entries need no build
        for (const Shape &s : shapes) {
            auto it = log.find({s.name, key});
            if (it == log.end()) {
                if (out_of_time()) break;
                Toolchain tools = o.tools;
                tools.budget_limited = seconds_left() < tools.timeout_seconds;
                tools.timeout_seconds = std::min(tools.timeout_seconds, seconds_left());
                if (!built) built = build(tools, c);
                const Result r = built->ok ? measure(tools, c, s) : *built;
                // Cut short by the budget or a signal: measured again when the search resumes.
                if (r.cut_short) break;
                if (!r.ok && key == "default") {
                    // attngen's own schedule builds and runs for every target and shape it
                    // supports: its failure is the target's or the toolchain's, not a schedule's.
                    std::fprintf(stderr,
                                 "\nattngen-autotune: the default schedule failed for --target "
                                 "%s on %s: %s\nNothing was logged.\n",
                                 o.target.c_str(), s.name.c_str(), r.error.c_str());
                    return 1;
                }
                append_log(o.log, o.target, s.name, key, r);
                it = log.emplace(std::make_pair(s.name, key), r).first;
            }
            ++done;
            const Result &r = it->second;
            auto b = best.find(s.name);
            if (r.ok && c.autoscheduler.empty() &&
                (b == best.end() || r.median_ms < b->second.second)) {
                b = best.insert_or_assign(s.name, std::make_pair(key, r.median_ms)).first;
            }
            progress(done, total, b == best.end() ? nullptr : &b->second,
                     std::max(0.0, seconds_left()));
        }
    }
    std::fprintf(stderr, "\n");
    if (stop_signal() != 0) {
        std::fprintf(stderr,
                     "attngen-autotune: stopped by signal %d; %zu of %zu measurements are in %s, "
                     "%s was not written (the same command resumes)\n",
                     stop_signal(), done, total, o.log.c_str(), o.out.c_str());
        return 128 + stop_signal();
    }
    for (const Shape &s : shapes) {
        if (best.count(s.name) == 0) {
            std::fprintf(stderr,
                         "attngen-autotune: no schedule of attngen's finished on %s: %zu of %zu "
                         "measurements within --budget %g s (failures, if any, are in %s); %s "
                         "was not written\n",
                         s.name.c_str(), done, total, o.budget_seconds, o.log.c_str(),
                         o.out.c_str());
            return 1;
        }
    }

    // One build serves every shape: with several shapes, it gets the knobs whose times have the
    // least geometric mean over all of them, so no single noisy shape decides.
    const auto geomean_ms = [&](const std::string &key) {
        double log_sum = 0;
        for (const Shape &s : shapes) {
            auto it = log.find({s.name, key});
            if (it == log.end() || !it->second.ok) return 0.0;
            log_sum += std::log(it->second.median_ms);
        }
        return std::exp(log_sum / double(shapes.size()));
    };
    const Candidate *all_best = nullptr;
    double all_best_ms = 0;
    for (const Candidate &c : order) {
        const double ms = c.autoscheduler.empty() ? geomean_ms(c.key()) : 0.0;
        if (ms > 0 && (all_best == nullptr || ms < all_best_ms)) {
            all_best = &c;
            all_best_ms = ms;
        }
    }
    const bool use_all_shapes = shapes.size() > 1 && all_best != nullptr;

    // The file the build reads: per shape class, the best knobs (attngen's schedule) and the
    // times of the default and of each autoscheduler, measured in this search.
    const Json previous = previous_entries(o.out, o.target, gpu);
    Json file = Json::object();
    file["target"] = o.target;
    file["seed"] = o.seed;
    file["build_shape"] = use_all_shapes ? kAllShapes : shapes.front().name;
    Json &entries = file["shapes"] = Json::object();
    if (use_all_shapes) {
        Json &entry = entries[kAllShapes];
        entry["best"] = all_best->key();
        entry["params"] = json_params(*all_best);
        entry["geomean_ms"] = json_ms(all_best_ms);
        entry["default_geomean_ms"] = json_ms(geomean_ms("default"));
        keep_unsearched(entry, previous, kAllShapes);
    }
    for (const Shape &s : shapes) {
        const auto find = [&](const std::string &key) -> const Result * {
            auto it = log.find({s.name, key});
            return it == log.end() ? nullptr : &it->second;
        };
        size_t tried = 0;
        for (const Candidate &c : order) tried += find(c.key()) != nullptr;
        const std::string best_key = best.at(s.name).first;
        const Candidate no_knobs;
        const Candidate *best_candidate = &no_knobs;
        for (const Candidate &c : order) {
            if (c.key() == best_key) best_candidate = &c;
        }
        Json &entry = entries[s.name];
        entry["best"] = best_key;
        entry["params"] = json_params(*best_candidate);
        entry["tuned_ms"] = json_ms(find(best_key));
        entry["default_ms"] = json_ms(find("default"));
        Json &autoschedulers = entry["autoschedulers_ms"] = Json::object();
        for (const std::string &a : split(o.autoschedulers, ','))
            autoschedulers[a] = json_ms(find(a));
        entry["candidates_measured"] = tried;
        keep_unsearched(entry, previous, s.name);
    }
    // Names that are not UTF-8 (they come from the command line) are written with U+FFFD.
    write_replacing(o.out, file.dump(2, ' ', false, Json::error_handler_t::replace) + '\n');
    std::fprintf(stderr, "attngen-autotune: %zu of %zu measurements done; wrote %s (log %s)\n",
                 done, total, o.out.c_str(), o.log.c_str());
    return 0;
}

extern "C" void on_stop_signal(int signal) {
    request_stop(signal);
}

}  // namespace

int main(int argc, char **argv) {
    const Command command = parse(argc, argv);
    // Ctrl-C or a kill ends the build or run in flight (its whole process group) and the
    // search; what was measured stays in the log. (std::system, used before, ignored SIGINT
    // while a build ran, and a killed search left its generator running.)
    struct sigaction stop = {};
    stop.sa_handler = on_stop_signal;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, nullptr);
    sigaction(SIGTERM, &stop, nullptr);
    try {
        return tune(command);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "\nattngen-autotune: %s\n", e.what());
        return 1;
    }
}
