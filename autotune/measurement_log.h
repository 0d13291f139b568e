// The tuner's measurement log: one line per measured (shape, candidate) of one target, so that
// an interrupted search resumes where it stopped and a rerun measures nothing twice.
//
//     shape<TAB>candidate<TAB>ok<TAB>ms<TAB>target
//     shape<TAB>candidate<TAB>error<TAB>why<TAB>target
//
// Lines without the target (written before it was recorded) are the "host" target's.
#ifndef ATTNGEN_AUTOTUNE_MEASUREMENT_LOG_H
#define ATTNGEN_AUTOTUNE_MEASUREMENT_LOG_H

#include <map>
#include <string>
#include <utility>

#include "evaluate.h"

namespace attngen::autotune {

// (shape, candidate key) -> result, for one target.
using Log = std::map<std::pair<std::string, std::string>, Result>;

// The entries of `target` in the log at `path` (none if it does not exist). A malformed line (a
// write cut short, an edit) is skipped with a warning naming the file and the line, and its
// candidate is measured again.
Log read_log(const std::string &path, const std::string &target);

// Appends one entry; throws std::runtime_error naming the file and the reason if it cannot.
void append_log(const std::string &path, const std::string &target, const std::string &shape,
                const std::string &key, const Result &r);

// Throws std::runtime_error naming the file and the reason unless the log can be appended to
// (it is created if missing).
void require_appendable(const std::string &path);

}  // namespace attngen::autotune

#endif  // ATTNGEN_AUTOTUNE_MEASUREMENT_LOG_H
