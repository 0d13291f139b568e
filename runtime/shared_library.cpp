// libattngen.so is attngen_core linked whole; CMake needs at least one source of its own.
#include <attngen/attngen.h>
