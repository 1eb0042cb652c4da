/* The backends linked into libpowerinfer itself, beside the modules it loads at run time
 * (pib_module.h). backends/builtin_backends.cpp holds the one table of them; the core finds an
 * entry by name, so that no file of lib/ includes a backend's own header (docs/backends.md). */
#ifndef PIB_BUILTIN_H
#define PIB_BUILTIN_H

#include <stddef.h>
#include <stdint.h>

#include "pib_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new instance. n_threads <= 0 means all hardware threads; memory_capacity 0 means the
 * machine's RAM, otherwise buffer_alloc fails with PIB_ERR_OUT_OF_MEMORY beyond it. */
typedef int (*pib_builtin_create_fn)(int32_t n_threads, size_t memory_capacity, pib_backend *out);

typedef struct pib_builtin_backend {
    const char *name; /* "cpu" */
    pib_builtin_create_fn create;
} pib_builtin_backend;

/* The built-in backend called `name`, or NULL when this build has none of that name. */
const pib_builtin_backend *pib_builtin_backend_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* PIB_BUILTIN_H */
