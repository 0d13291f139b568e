// attngen-autotune: searches the schedule knobs of the fused MHA forward for one Halide target
// and a set of shapes, with Halide's autoschedulers as candidates too, and writes the winners
// to a JSON file the build reads (cmake/AttngenTunedParams.cmake). Every candidate is checked
// against the float64 reference before its time counts. See README, "Tuning".
//
//   attngen-autotune --target host --shapes bert-128,tutorial --budget 600
//                    --out generators/tuned/x86-64-linux.json --seed 1
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "evaluate.h"
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
    Toolchain tools{ATTNGEN_GENERATOR_PATH, ATTNGEN_HALIDE_PLUGIN_DIR, "c++", "host", "", 180};
};

// What the command line gives, checked: the options, the shapes and the --try candidates.
struct Command {
    Options options;
    std::vector<Shape> shapes;
    std::vector<Candidate> tries;
};

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
    app.add_option("--budget", o.budget_seconds, "Hard time limit of the search")
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

// The log: one line per measured (shape, candidate), so an interrupted search resumes where it
// stopped. "shape<TAB>candidate<TAB>ok<TAB>ms" or "shape<TAB>candidate<TAB>error<TAB>why".
using Log = std::map<std::pair<std::string, std::string>, Result>;

Log read_log(const std::string &path) {
    Log log;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        const std::vector<std::string> f = split(line, '\t');
        if (f.size() < 3) continue;
        Result r;
        r.ok = f[2] == "ok";
        if (r.ok && f.size() >= 4) r.median_ms = std::stod(f[3]);
        if (!r.ok && f.size() >= 4) r.error = f[3];
        log[{f[0], f[1]}] = r;
    }
    return log;
}

void append_log(const std::string &path, const std::string &shape, const std::string &key,
                const Result &r) {
    std::ofstream out(path, std::ios::app);
    out << shape << '\t' << key << '\t' << (r.ok ? "ok" : "error") << '\t'
        << (r.ok ? std::to_string(r.median_ms) : r.error) << '\n';
}

void progress(size_t done, size_t total, const std::string &best, double best_ms,
              double seconds_left) {
    const int width = 30;
    const int filled = total ? int(width * done / total) : width;
    std::fprintf(
        stderr, "\r[%s%s] %zu/%zu  best %s  %.0f s left   ",
        std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
        done, total,
        best_ms > 0 ? (std::to_string(best_ms).substr(0, 6) + " ms (" + best + ")").c_str() : "-",
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

int tune(const Command &command) {
    Options o = command.options;
    const std::vector<Shape> &shapes = command.shapes;
    const ScratchDir work;
    o.tools.work_dir = work.path().string();

    std::vector<Candidate> order = candidates_in_order(
        o.seed, o.random_candidates, split(o.autoschedulers, ','), is_gpu_target(o.target));
    // Knob settings to try first (after the defaults), e.g. the current tuned file's.
    order.insert(order.begin() + 1, command.tries.begin(), command.tries.end());
    Log log = read_log(o.log);
    const size_t total = order.size() * shapes.size();
    const auto start = Clock::now();
    const auto seconds_left = [&] {
        return o.budget_seconds - std::chrono::duration<double>(Clock::now() - start).count();
    };
    size_t done = 0;
    std::map<std::string, std::pair<std::string, double>> best;  // shape -> (key, ms)
    for (const Candidate &c : order) {
        const std::string key = c.key();
        std::string build_error = "?";  // built lazily: resumed entries need no build
        for (const Shape &s : shapes) {
            auto it = log.find({s.name, key});
            if (it == log.end()) {
                if (seconds_left() <= 0) break;
                Toolchain tools = o.tools;
                tools.timeout_seconds =
                    std::max(5.0, std::min(tools.timeout_seconds, seconds_left()));
                if (build_error == "?") build_error = build(tools, c);
                Result r;
                if (build_error.empty()) {
                    r = measure(tools, c, s);
                } else {
                    r.error = build_error;
                }
                append_log(o.log, s.name, key, r);
                it = log.emplace(std::make_pair(s.name, key), r).first;
            }
            ++done;
            const Result &r = it->second;
            if (r.ok && c.autoscheduler.empty() &&
                (best[s.name].second == 0 || r.median_ms < best[s.name].second)) {
                best[s.name] = {key, r.median_ms};
            }
            progress(done, total, best[s.name].first, best[s.name].second,
                     std::max(0.0, seconds_left()));
        }
        if (seconds_left() <= 0) break;
    }
    std::fprintf(stderr, "\n");

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
    }
    for (const Shape &s : shapes) {
        const auto find = [&](const std::string &key) -> const Result * {
            auto it = log.find({s.name, key});
            return it == log.end() ? nullptr : &it->second;
        };
        size_t tried = 0;
        for (const Candidate &c : order) tried += find(c.key()) != nullptr;
        const std::string best_key = best.count(s.name) ? best[s.name].first : "default";
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
    }
    std::ofstream out(o.out);
    // Names that are not UTF-8 (they come from the command line) are written with U+FFFD.
    out << file.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
    out.close();
    if (!out) {
        std::fprintf(stderr, "attngen-autotune: cannot write %s\n", o.out.c_str());
        return 1;
    }
    std::fprintf(stderr, "attngen-autotune: %zu of %zu measurements done; wrote %s (log %s)\n",
                 done, total, o.out.c_str(), o.log.c_str());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const Command command = parse(argc, argv);
    try {
        return tune(command);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "\nattngen-autotune: %s\n", e.what());
        return 1;
    }
}
