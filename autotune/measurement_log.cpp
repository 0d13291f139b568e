#include "measurement_log.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace attngen::autotune {
namespace {

// The line's tab-separated fields, empty ones kept (shapes.h's split drops them, and a line cut
// after "ok<TAB>" read as 0 ms).
std::vector<std::string> fields(const std::string &line) {
    std::vector<std::string> f;
    size_t start = 0;
    for (;;) {
        const size_t tab = line.find('\t', start);
        f.push_back(line.substr(start, tab - start));
        if (tab == std::string::npos) return f;
        start = tab + 1;
    }
}

// A positive, finite number of milliseconds, the whole field.
bool parse_ms(const std::string &text, double *ms) {
    errno = 0;
    char *end = nullptr;
    *ms = std::strtod(text.c_str(), &end);
    return !text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(*ms) &&
           *ms > 0;
}

std::runtime_error file_error(const char *what, const std::string &path) {
    return std::runtime_error(std::string(what) + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Log read_log(const std::string &path, const std::string &target) {
    Log log;
    std::ifstream in(path);
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        const std::vector<std::string> f = fields(line);
        Result r;
        r.ok = f.size() >= 4 && f[2] == "ok";
        const bool well_formed = (f.size() == 4 || f.size() == 5) && !f[0].empty() &&
                                 !f[1].empty() &&
                                 (r.ok ? parse_ms(f[3], &r.median_ms) : f[2] == "error");
        if (!well_formed) {
            std::fprintf(stderr, "attngen-autotune: %s line %zu is malformed, skipped: %s\n",
                         path.c_str(), number, line.c_str());
            continue;
        }
        if ((f.size() == 5 ? f[4] : std::string("host")) != target) continue;
        if (!r.ok) r.error = f[3];
        log[{f[0], f[1]}] = r;
    }
    return log;
}

void append_log(const std::string &path, const std::string &target, const std::string &shape,
                const std::string &key, const Result &r) {
    std::string line = shape + '\t' + key + '\t' + (r.ok ? "ok" : "error") + '\t';
    if (r.ok) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.6f", r.median_ms);
        line += ms;
    } else {
        std::string why = r.error;  // one field of one line
        for (char &c : why) c = c == '\t' || c == '\n' ? ' ' : c;
        line += why;
    }
    line += '\t' + target + '\n';
    FILE *f = std::fopen(path.c_str(), "a");
    if (f == nullptr) throw file_error("cannot append to the log", path);
    const bool written = std::fputs(line.c_str(), f) >= 0;
    if (std::fclose(f) != 0 || !written) throw file_error("cannot append to the log", path);
}

void require_appendable(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "a");
    if (f == nullptr || std::fclose(f) != 0) throw file_error("cannot append to the log", path);
}

}  // namespace attngen::autotune
