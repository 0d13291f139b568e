#include <attngen/attngen.h>

extern "C" const char *attngen_version(void) {
    return ATTNGEN_VERSION_STRING;
}
