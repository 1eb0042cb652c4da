// Compiled by check_backend_include_path.cmake with a backend's include path, once per header
// named in PI_PROBE_HEADER: the backend interface and lib/quant must compile, the core's other
// headers must not be found.
#include PI_PROBE_HEADER
