// attngen-autotune: searches the schedule knobs of the fused MHA forward for one Halide target
// and a set of shapes, with Halide's autoschedulers as candidates too, and writes the winners
// to a JSON file the build reads (cmake/AttngenTunedParams.cmake). Every candidate is checked
// against the float64 reference before its time counts. See README, "Tuning".
//
//   attngen-autotune --target host --shapes bert-128,tutorial --budget 600
//                    --out generators/tuned/x86-64-linux.json --seed 1
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "evaluate.h"
#include "search_space.h"
#include "shapes.h"

namespace {

// The build_shape entry of a search over several shapes: the knobs best over all of them.
const std::string kAllShapes = "all_shapes";

using namespace attngen::autotune;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string target = "host";
    std::string shapes = "bert-128";
    double budget_seconds = 300;
    std::string out;
    std::string log;  // default: <out>.log
    uint32_t seed = 1;
    size_t random_candidates = 200;
    std::string autoschedulers = "";  // default: by target family (see below)
    bool autoschedulers_given = false;
    std::string tries;  // candidates measured right after the defaults, ';'-separated
    Toolchain tools{ATTNGEN_GENERATOR_PATH, ATTNGEN_HALIDE_PLUGIN_DIR, "c++", "host", "", 180};
};

bool is_gpu_target(const std::string &target) {
    return target.find("cuda") != std::string::npos || target.find("opencl") != std::string::npos;
}

void usage_error(const std::string &message) {
    std::fprintf(stderr,
                 "attngen-autotune: %s\n"
                 "usage: attngen-autotune --out FILE [--target host|<halide target>]\n"
                 "       [--shapes NAMES|B,Lq,Lkv,D,H[,causal];...] [--budget SECONDS]\n"
                 "       [--seed N] [--log FILE] [--candidates N] [--autoschedulers A,B|none]\n"
                 "       [--generator PATH] [--timeout SECONDS] [--try K=V,K=V;...]\n",
                 message.c_str());
    std::exit(2);
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage_error("missing value after " + flag);
        const std::string value = argv[++i];
        try {
            if (flag == "--target")
                o.target = value;
            else if (flag == "--shapes")
                o.shapes = value;
            else if (flag == "--budget")
                o.budget_seconds = std::stod(value);
            else if (flag == "--out")
                o.out = value;
            else if (flag == "--log")
                o.log = value;
            else if (flag == "--seed")
                o.seed = uint32_t(std::stoul(value));
            else if (flag == "--candidates")
                o.random_candidates = std::stoul(value);
            else if (flag == "--autoschedulers") {
                o.autoschedulers = value == "none" ? "" : value;
                o.autoschedulers_given = true;
            } else if (flag == "--generator")
                o.tools.generator = value;
            else if (flag == "--timeout")
                o.tools.timeout_seconds = std::stod(value);
            else if (flag == "--try")
                o.tries = value;
            else
                usage_error("unknown option " + flag);
        } catch (const std::logic_error &) {
            usage_error("bad value '" + value + "' for " + flag);
        }
    }
    if (o.out.empty()) usage_error("--out is required");
    if (!(o.budget_seconds > 0)) usage_error("--budget must be positive");
    if (o.log.empty()) o.log = o.out + ".log";
    // Installed, the generator sits in <prefix>/libexec/attngen beside <prefix>/bin.
    char self[4096] = {};
    if (readlink("/proc/self/exe", self, sizeof self - 1) > 0 &&
        o.tools.generator == ATTNGEN_GENERATOR_PATH) {
        std::string dir = self;
        dir = dir.substr(0, dir.rfind('/'));
        const std::string installed = dir + "/../libexec/attngen/attngen_generators";
        if (access(installed.c_str(), X_OK) == 0) o.tools.generator = installed;
    }
    o.tools.target = o.target;
    if (!o.autoschedulers_given) {
        o.autoschedulers = is_gpu_target(o.target) ? "Anderson2021,Mullapudi2016,Li2018"
                                                   : "Mullapudi2016,Li2018,Adams2019";
    }
    return o;
}

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

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
}

std::string json_ms(const Result *r) {
    return r != nullptr && r->ok ? std::to_string(r->median_ms) : "null";
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    std::vector<Shape> shapes;
    try {
        shapes = parse_shapes(o.shapes);
    } catch (const std::invalid_argument &e) {
        usage_error(e.what());
    }
    char work[] = "/tmp/attngen-autotune-XXXXXX";
    if (mkdtemp(work) == nullptr) usage_error("cannot create a scratch directory");
    o.tools.work_dir = work;

    std::vector<Candidate> order = candidates_in_order(
        o.seed, o.random_candidates, split(o.autoschedulers, ','), is_gpu_target(o.target));
    // Knob settings to try first (after the defaults), e.g. the current tuned file's.
    std::vector<Candidate> tries;
    for (const std::string &text : split(o.tries, ';')) {
        try {
            tries.push_back(parse_candidate(text, is_gpu_target(o.target)));
        } catch (const std::invalid_argument &e) {
            usage_error(std::string("--try: ") + e.what());
        }
    }
    order.insert(order.begin() + 1, tries.begin(), tries.end());
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
    std::system(("rm -rf '" + std::string(work) + "'").c_str());

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
    const auto write_params = [](std::ostream &out, const Candidate &c) {
        out << "      \"params\": {";
        bool first = true;
        for (const auto &[name, value] : c.knobs) {
            out << (first ? "" : ", ") << json_string(name) << ": " << value;
            first = false;
        }
        out << "},\n";
    };

    // The file the build reads: per shape class, the best knobs (attngen's schedule) and the
    // times of the default and of each autoscheduler, measured in this search.
    std::ofstream out(o.out);
    out << "{\n  \"target\": " << json_string(o.target) << ",\n";
    out << "  \"seed\": " << o.seed << ",\n";
    out << "  \"build_shape\": " << json_string(use_all_shapes ? kAllShapes : shapes.front().name)
        << ",\n";
    out << "  \"shapes\": {";
    if (use_all_shapes) {
        out << "\n    " << json_string(kAllShapes) << ": {\n";
        write_params(out, *all_best);
        out << "      \"best\": " << json_string(all_best->key()) << ",\n";
        out << "      \"geomean_ms\": " << std::to_string(all_best_ms) << ",\n";
        const double default_ms = geomean_ms("default");
        out << "      \"default_geomean_ms\": "
            << (default_ms > 0 ? std::to_string(default_ms) : "null") << "\n    },";
    }
    for (size_t si = 0; si < shapes.size(); ++si) {
        const Shape &s = shapes[si];
        const auto find = [&](const std::string &key) -> const Result * {
            auto it = log.find({s.name, key});
            return it == log.end() ? nullptr : &it->second;
        };
        size_t tried = 0;
        for (const Candidate &c : order) tried += find(c.key()) != nullptr;
        out << (si ? "," : "") << "\n    " << json_string(s.name) << ": {\n";
        const std::string best_key = best.count(s.name) ? best[s.name].first : "default";
        const Candidate no_knobs;
        const Candidate *best_candidate = &no_knobs;
        for (const Candidate &c : order) {
            if (c.key() == best_key) best_candidate = &c;
        }
        write_params(out, *best_candidate);
        out << "      \"best\": " << json_string(best_key) << ",\n";
        out << "      \"tuned_ms\": " << json_ms(find(best_key)) << ",\n";
        out << "      \"default_ms\": " << json_ms(find("default")) << ",\n";
        out << "      \"autoschedulers_ms\": {";
        bool first = true;
        for (const std::string &a : split(o.autoschedulers, ',')) {
            const Result *r = find(a);
            out << (first ? "" : ", ") << json_string(a) << ": " << json_ms(r);
            first = false;
        }
        out << "},\n      \"candidates_measured\": " << tried << "\n    }";
    }
    out << "\n  }\n}\n";
    std::fprintf(stderr, "attngen-autotune: %zu of %zu measurements done; wrote %s (log %s)\n",
                 done, total, o.out.c_str(), o.log.c_str());
    return 0;
}
