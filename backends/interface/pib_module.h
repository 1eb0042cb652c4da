/* The door of a backend module (libpowerinfer-cuda.so, libpowerinfer-hip.so): four C functions
 * the core finds with dlsym (lib/backend/module_loader.cpp). A module includes this header and
 * pib_backend.h, nothing else of the core, and links nothing of it.
 *
 * The core first calls pib_module_api_version, whose signature never changes, and refuses a
 * module built against another PIB_API_VERSION without calling anything else. The other
 * functions take the core's version too and refuse a mismatch themselves. They return a
 * pib_status; on failure they write a one-line reason (NUL-terminated, truncated to why_size)
 * into `why` when it is not NULL. */
#ifndef PIB_MODULE_H
#define PIB_MODULE_H

#include "pib_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pib_module_device {
    char name[256];      /* e.g. "NVIDIA GeForce RTX 4090" */
    size_t memory_total; /* bytes */
    size_t memory_free;  /* bytes */
} pib_module_device;

/* PIB_API_VERSION of the pib_backend.h the module was compiled against. */
typedef uint32_t (*pib_module_api_version_fn)(void);
/* Devices the module can drive; fails with a reason when there is no driver or no device. */
typedef int (*pib_module_device_count_fn)(uint32_t api_version, int32_t *count, char *why,
                                          size_t why_size);
/* Name and memory of device `device_index` (0 .. count-1). */
typedef int (*pib_module_describe_fn)(uint32_t api_version, int32_t device_index,
                                      pib_module_device *out, char *why, size_t why_size);
/* A backend instance on device `device_index`; release it with out->vt->destroy(out->ctx). */
typedef int (*pib_module_create_fn)(uint32_t api_version, int32_t device_index, pib_backend *out,
                                    char *why, size_t why_size);

#define PIB_MODULE_API_VERSION_SYMBOL "pib_module_api_version"
#define PIB_MODULE_DEVICE_COUNT_SYMBOL "pib_module_device_count"
#define PIB_MODULE_DESCRIBE_SYMBOL "pib_module_describe"
#define PIB_MODULE_CREATE_SYMBOL "pib_module_create"

#ifdef __cplusplus
}
#endif

#endif /* PIB_MODULE_H */
