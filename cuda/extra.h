/* Functions of the CUDA library that have no CPU twin: device discovery and the error channel
 * through which kernels report failed launches (Python raises a RuntimeError from it). */
#ifndef SINGA_TENSOR_CUDA_EXTRA_H_
#define SINGA_TENSOR_CUDA_EXTRA_H_

#ifndef ST_CDEF /* cffi supplies the fixed-width types itself */
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* number of usable CUDA devices; 0 on any error (no driver, no device) */
int32_t st_cuda_device_count(void);
/* The first error recorded on this thread since the last call, as text, or NULL if none. The
 * call clears it; the text stays valid until the next error is recorded on this thread. */
const char* st_cuda_last_error(void);
void st_cuda_clear_error(void);

#ifdef __cplusplus
}
#endif

#endif /* SINGA_TENSOR_CUDA_EXTRA_H_ */
