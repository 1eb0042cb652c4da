/* Stand-ins for backend modules that the loader must refuse, built with different definitions:
 * FAKE_API_VERSION (a version other than the core's), FAKE_NO_DEVICE (loads, finds nothing),
 * FAKE_NO_SYMBOLS (a shared object without the module door). */
#include "pib_module.h"

#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

#ifdef FAKE_NO_SYMBOLS
EXPORT int fake_module_unrelated(void) {
    return 0;
}
#else
EXPORT uint32_t pib_module_api_version(void) {
    return FAKE_API_VERSION;
}

EXPORT int pib_module_device_count(uint32_t api_version, int32_t* count, char* why,
                                   size_t why_size) {
    (void)api_version;
    *count = 0;
    if (why != NULL && why_size > 0) snprintf(why, why_size, "fake: no device here");
    return PIB_ERR_DEVICE;
}

EXPORT int pib_module_describe(uint32_t api_version, int32_t device_index, pib_module_device* out,
                               char* why, size_t why_size) {
    (void)api_version;
    (void)device_index;
    (void)out;
    if (why != NULL && why_size > 0) snprintf(why, why_size, "fake: no device here");
    return PIB_ERR_DEVICE;
}

EXPORT int pib_module_create(uint32_t api_version, int32_t device_index, pib_backend* out,
                             char* why, size_t why_size) {
    (void)api_version;
    (void)device_index;
    out->vt = NULL;
    out->ctx = NULL;
    if (why != NULL && why_size > 0) snprintf(why, why_size, "fake: no device here");
    return PIB_ERR_DEVICE;
}
#endif
