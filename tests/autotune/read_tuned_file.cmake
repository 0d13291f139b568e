# cmake -DFILE=<tuned file> [-DSHAPE=<class>] -P read_tuned_file.cmake
# Prints the generator arguments the build would take from FILE; fails as the build would.
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/AttngenTunedParams.cmake")
if (SHAPE)
    attngen_read_tuned_params(params "${FILE}" SHAPE "${SHAPE}")
else ()
    attngen_read_tuned_params(params "${FILE}")
endif ()
message("params: ${params}")
