/* The kernel ABI of singa_tensor: one C interface, implemented by the C++ CPU library
 * (cpp/src) and, with a trailing stream argument, by the CUDA library (cuda/).
 *
 * Every symbol is st_<op>_<dtype>. The lists below are X-macros so that the declarations,
 * the C++ and CUDA definitions, and the Python bindings (cffi reads this header after the C
 * preprocessor) all come from one place.
 *
 * Conventions
 *   - Python validates every shape, dtype and index before calling; kernels trust their inputs.
 *   - Strides are in elements, may be zero (broadcast) or negative (flipped views).
 *   - "outer, n, inner" describes a contiguous tensor viewed as [outer, n, inner] where the
 *     middle axis is the one reduced, scanned or indexed.
 *   - Dtype suffixes: f32 f64 f16 bf16 i32 i64 u8 (bool is u8 holding 0 or 1).
 */
#ifndef SINGA_TENSOR_H_
#define SINGA_TENSOR_H_

#ifndef ST_CDEF /* cffi supplies the fixed-width types itself */
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA library declares the same kernels with a trailing stream argument (a cudaStream_t
 * passed as void*, so this header needs no CUDA include). Build it with ST_CUDA_ABI defined. */
#ifdef ST_CUDA_ABI
#define ST_S , void* stream
#else
#define ST_S
#endif

/* ---- dtype lists: X(suffix, C type) ------------------------------------------------------ */
#define ST_FLOAT_TYPES(X, ...) X(f32, float, __VA_ARGS__) X(f64, double, __VA_ARGS__)
#define ST_INT_TYPES(X, ...) X(i32, int32_t, __VA_ARGS__) X(i64, int64_t, __VA_ARGS__)
#define ST_NUM_TYPES(X, ...) ST_FLOAT_TYPES(X, __VA_ARGS__) ST_INT_TYPES(X, __VA_ARGS__)
#define ST_ALL_TYPES(X, ...) ST_NUM_TYPES(X, __VA_ARGS__) X(u8, uint8_t, __VA_ARGS__)
/* the 16-bit floats, stored as their raw bits: kernels on them load each element into float,
 * compute in float registers and round once on store (ST_TAG_<suffix> of dtypes.h names the
 * format, since both share the C type) */
#define ST_HALF_TYPES(X, ...) X(f16, uint16_t, __VA_ARGS__) X(bf16, uint16_t, __VA_ARGS__)
#define ST_FLOAT_HALF_TYPES(X, ...) ST_FLOAT_TYPES(X, __VA_ARGS__) ST_HALF_TYPES(X, __VA_ARGS__)
/* raw storage widths used by layout-only kernels (copy) */
#define ST_WIDTH_TYPES(X, ...)                                                     \
  X(b8, uint8_t, __VA_ARGS__) X(b16, uint16_t, __VA_ARGS__) X(b32, uint32_t, __VA_ARGS__) \
  X(b64, uint64_t, __VA_ARGS__)

/* ---- op lists ----------------------------------------------------------------------------- */
/* y = f(x; alpha, beta), contiguous, float types */
#define ST_UNARY_FLOAT_OPS(X, ...)                                                          \
  X(neg, __VA_ARGS__) X(abs, __VA_ARGS__) X(sign, __VA_ARGS__) X(exp, __VA_ARGS__)           \
  X(log, __VA_ARGS__) X(log1p, __VA_ARGS__) X(expm1, __VA_ARGS__) X(sqrt, __VA_ARGS__)       \
  X(rsqrt, __VA_ARGS__) X(sin, __VA_ARGS__) X(cos, __VA_ARGS__) X(tan, __VA_ARGS__)          \
  X(tanh, __VA_ARGS__) X(sigmoid, __VA_ARGS__) X(relu, __VA_ARGS__)                          \
  X(leaky_relu, __VA_ARGS__) X(elu, __VA_ARGS__) X(gelu, __VA_ARGS__)                        \
  X(gelu_tanh, __VA_ARGS__) X(silu, __VA_ARGS__) X(softplus, __VA_ARGS__) X(erf, __VA_ARGS__) \
  X(floor, __VA_ARGS__) X(ceil, __VA_ARGS__) X(round, __VA_ARGS__) X(clamp, __VA_ARGS__)     \
  X(reciprocal, __VA_ARGS__) X(square, __VA_ARGS__) X(relu_mask, __VA_ARGS__)                \
  X(pow_scalar, __VA_ARGS__) X(affine, __VA_ARGS__) X(asin, __VA_ARGS__)                   \
  X(acos, __VA_ARGS__) X(atan, __VA_ARGS__) X(asinh, __VA_ARGS__) X(acosh, __VA_ARGS__)     \
  X(atanh, __VA_ARGS__) X(sinh, __VA_ARGS__) X(cosh, __VA_ARGS__) X(lgamma, __VA_ARGS__)    \
  X(digamma, __VA_ARGS__) X(polygamma, __VA_ARGS__) X(erfinv, __VA_ARGS__)                  \
  X(erfc, __VA_ARGS__) X(log2, __VA_ARGS__) X(log10, __VA_ARGS__) X(exp2, __VA_ARGS__)      \
  X(trunc, __VA_ARGS__) X(frac, __VA_ARGS__)
/* the subset that makes sense on integers */
#define ST_UNARY_INT_OPS(X, ...)                                                            \
  X(neg, __VA_ARGS__) X(abs, __VA_ARGS__) X(sign, __VA_ARGS__) X(clamp, __VA_ARGS__)         \
  X(square, __VA_ARGS__) X(relu, __VA_ARGS__) X(affine, __VA_ARGS__)

/* out = f(a, b) with broadcasting through strides; numeric types */
#define ST_BINARY_OPS(X, ...)                                                               \
  X(add, __VA_ARGS__) X(sub, __VA_ARGS__) X(mul, __VA_ARGS__) X(div, __VA_ARGS__)            \
  X(floor_divide, __VA_ARGS__) X(remainder, __VA_ARGS__) X(pow, __VA_ARGS__)                 \
  X(maximum, __VA_ARGS__) X(minimum, __VA_ARGS__) X(atan2, __VA_ARGS__)                     \
  X(hypot, __VA_ARGS__) X(fmod, __VA_ARGS__) X(copysign, __VA_ARGS__) X(fmax, __VA_ARGS__)   \
  X(fmin, __VA_ARGS__)
/* out(bool) = f(a, b); all types */
#define ST_COMPARE_OPS(X, ...)                                                              \
  X(eq, __VA_ARGS__) X(ne, __VA_ARGS__) X(lt, __VA_ARGS__) X(le, __VA_ARGS__)                \
  X(gt, __VA_ARGS__) X(ge, __VA_ARGS__)
/* on bools */
#define ST_LOGICAL_OPS(X, ...) X(logical_and, __VA_ARGS__) X(logical_or, __VA_ARGS__) \
  X(logical_xor, __VA_ARGS__)

/* y[outer, inner] = reduce over n; numeric types and bool */
#define ST_REDUCE_OPS(X, ...) X(sum, __VA_ARGS__) X(prod, __VA_ARGS__) X(max, __VA_ARGS__) \
  X(min, __VA_ARGS__)
/* y[outer, inner] = index of max/min over n (first occurrence; NaN wins) */
#define ST_ARG_REDUCE_OPS(X, ...) X(argmax, __VA_ARGS__) X(argmin, __VA_ARGS__)
/* y has the shape of x; float types */
#define ST_SCAN_FLOAT_OPS(X, ...) X(softmax, __VA_ARGS__) X(log_softmax, __VA_ARGS__)
#define ST_SCAN_OPS(X, ...) X(cumsum, __VA_ARGS__) X(cumprod, __VA_ARGS__)

/* ---- declarations -------------------------------------------------------------------------- */
#define ST_DECL_UNARY(op, sfx, T) \
  void st_##op##_##sfx(const T* x, T* y, int64_t n, double alpha, double beta ST_S);
#define ST_DECL_UNARY_FLOAT(sfx, T, _) ST_UNARY_FLOAT_OPS(ST_DECL_UNARY, sfx, T)
#define ST_DECL_UNARY_INT(sfx, T, _) ST_UNARY_INT_OPS(ST_DECL_UNARY, sfx, T)
ST_FLOAT_TYPES(ST_DECL_UNARY_FLOAT, _)
ST_INT_TYPES(ST_DECL_UNARY_INT, _)
ST_HALF_TYPES(ST_DECL_UNARY_FLOAT, _)
void st_logical_not_u8(const uint8_t* x, uint8_t* y, int64_t n, double alpha, double beta ST_S);
/* isnan/isinf/isfinite -> bool */
#define ST_DECL_FLOAT_TEST(sfx, T, _)                                      \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n ST_S);                  \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n ST_S);
ST_FLOAT_TYPES(ST_DECL_FLOAT_TEST, _)
ST_HALF_TYPES(ST_DECL_FLOAT_TEST, _)
/* dx = g * f'(x; alpha, beta) for the unary ops whose gradient is one kernel (functors
 * fn::<op>_backward), x, g and dx contiguous of n elements; float types. sigmoid and tanh
 * read their output y = f(x) in x's place */
#define ST_UNARY_GRAD_OPS(X, ...) X(gelu, __VA_ARGS__) X(gelu_tanh, __VA_ARGS__) X(silu, __VA_ARGS__) \
  X(relu, __VA_ARGS__) X(sigmoid, __VA_ARGS__) X(tanh, __VA_ARGS__)
#define ST_DECL_UNARY_GRAD(op, sfx, T)                                                      \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,    \
                                double beta ST_S);
#define ST_DECL_UNARY_GRAD_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DECL_UNARY_GRAD, sfx, T)
ST_FLOAT_TYPES(ST_DECL_UNARY_GRAD_T, _)
ST_HALF_TYPES(ST_DECL_UNARY_GRAD_T, _)

#define ST_DECL_BINARY(op, sfx, T)                                                      \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb ST_S);
#define ST_DECL_BINARY_T(sfx, T, _) ST_BINARY_OPS(ST_DECL_BINARY, sfx, T)
ST_NUM_TYPES(ST_DECL_BINARY_T, _)
ST_HALF_TYPES(ST_DECL_BINARY_T, _)
#define ST_DECL_COMPARE(op, sfx, T)                                                            \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb ST_S);
#define ST_DECL_COMPARE_T(sfx, T, _) ST_COMPARE_OPS(ST_DECL_COMPARE, sfx, T)
ST_ALL_TYPES(ST_DECL_COMPARE_T, _)
ST_HALF_TYPES(ST_DECL_COMPARE_T, _)
ST_LOGICAL_OPS(ST_DECL_BINARY, u8, uint8_t)

/* out = cond ? a : b, broadcast through strides */
#define ST_DECL_WHERE(sfx, T, _)                                                       \
  void st_where_##sfx(const uint8_t* cond, const T* a, const T* b, T* out, int32_t ndim, \
                      const int64_t* shape, const int64_t* sc, const int64_t* sa,       \
                      const int64_t* sb ST_S);
ST_ALL_TYPES(ST_DECL_WHERE, _)
ST_HALF_TYPES(ST_DECL_WHERE, _)

/* y = x element by element, both strided: contiguous(), expand, flip, cat, setitem, fill */
#define ST_DECL_COPY(sfx, T, _)                                                                \
  void st_copy_##sfx(const void* x, void* y, int32_t ndim, const int64_t* shape,                \
                     const int64_t* sx, const int64_t* sy ST_S);
ST_WIDTH_TYPES(ST_DECL_COPY, _)

/* dtype conversion, contiguous: st_cast_<from>_<to> */
#define ST_CAST_TYPES(X, ...)                                                                 \
  X(f32, float, __VA_ARGS__) X(f64, double, __VA_ARGS__) X(f16, uint16_t, __VA_ARGS__)        \
  X(bf16, uint16_t, __VA_ARGS__) X(i32, int32_t, __VA_ARGS__) X(i64, int64_t, __VA_ARGS__)    \
  X(u8, uint8_t, __VA_ARGS__)
/* the same list again: a macro cannot expand itself, and casts need a nested loop */
#define ST_CAST_TYPES_INNER(X, ...)                                                           \
  X(f32, float, __VA_ARGS__) X(f64, double, __VA_ARGS__) X(f16, uint16_t, __VA_ARGS__)        \
  X(bf16, uint16_t, __VA_ARGS__) X(i32, int32_t, __VA_ARGS__) X(i64, int64_t, __VA_ARGS__)    \
  X(u8, uint8_t, __VA_ARGS__)
#define ST_DECL_CAST_TO(dsfx, D, ssfx, S) \
  void st_cast_##ssfx##_##dsfx(const S* x, D* y, int64_t n ST_S);
#define ST_DECL_CAST_FROM(ssfx, S, _) ST_CAST_TYPES_INNER(ST_DECL_CAST_TO, ssfx, S)
ST_CAST_TYPES(ST_DECL_CAST_FROM, _)

/* y[i] = start + i * step */
#define ST_DECL_ARANGE(sfx, T, _) \
  void st_arange_##sfx(T* y, int64_t n, double start, double step ST_S);
ST_NUM_TYPES(ST_DECL_ARANGE, _)
ST_HALF_TYPES(ST_DECL_ARANGE, _)

/* reductions over the middle axis of [outer, n, inner] */
#define ST_DECL_REDUCE(op, sfx, T) \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner ST_S);
#define ST_DECL_REDUCE_T(sfx, T, _) ST_REDUCE_OPS(ST_DECL_REDUCE, sfx, T)
ST_ALL_TYPES(ST_DECL_REDUCE_T, _)
ST_HALF_TYPES(ST_DECL_REDUCE_T, _)
#define ST_DECL_ARG_REDUCE(op, sfx, T) \
  void st_##op##_##sfx(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner ST_S);
#define ST_DECL_ARG_REDUCE_T(sfx, T, _) ST_ARG_REDUCE_OPS(ST_DECL_ARG_REDUCE, sfx, T)
ST_ALL_TYPES(ST_DECL_ARG_REDUCE_T, _)
ST_HALF_TYPES(ST_DECL_ARG_REDUCE_T, _)
/* sort: the first k entries of each line of [outer, n, inner] in order, into values and
 * indices of shape [outer, k, inner] (k == n: a full sort). Ascending, or descending when
 * descending != 0; NaN counts as larger than every number; equal keys keep their index order
 * (a stable sort, and topk takes the lower index first among ties). */
#define ST_DECL_SORT(sfx, T, _)                                                                \
  void st_sort_##sfx(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,        \
                     int64_t inner, int64_t k, int32_t descending ST_S);
ST_ALL_TYPES(ST_DECL_SORT, _)
ST_HALF_TYPES(ST_DECL_SORT, _)
#define ST_DECL_SCAN_FLOAT_T(sfx, T, _) ST_SCAN_FLOAT_OPS(ST_DECL_REDUCE, sfx, T)
ST_FLOAT_TYPES(ST_DECL_SCAN_FLOAT_T, _)
ST_HALF_TYPES(ST_DECL_SCAN_FLOAT_T, _)
#define ST_DECL_SCAN_T(sfx, T, _) ST_SCAN_OPS(ST_DECL_REDUCE, sfx, T)
ST_NUM_TYPES(ST_DECL_SCAN_T, _)
ST_HALF_TYPES(ST_DECL_SCAN_T, _)
/* float-only reductions: logsumexp, and var with a correction (Bessel) term */
#define ST_DECL_FLOAT_REDUCE(sfx, T, _)                                                        \
  void st_logsumexp_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner ST_S);    \
  void st_var_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,                \
                    double correction ST_S);
ST_FLOAT_TYPES(ST_DECL_FLOAT_REDUCE, _)
ST_HALF_TYPES(ST_DECL_FLOAT_REDUCE, _)

/* C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], row-major, batch strides in elements */
#define ST_DECL_GEMM(sfx, T, _)                                                               \
  void st_gemm_##sfx(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,       \
                     double alpha, const T* a, int64_t lda, const T* b, int64_t ldb, double beta, \
                     T* c, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,    \
                     int64_t stride_c ST_S);
ST_NUM_TYPES(ST_DECL_GEMM, _)
ST_HALF_TYPES(ST_DECL_GEMM, _)

/* indexing along the middle axis; indices are validated (and wrapped) by Python.
 *   gather:       y[o, j, i] = x[o, idx[o, j, i], i]           (x: [outer, nx, inner])
 *   scatter:      y[o, idx[o, j, i], i] = src[o, j, i]         (y: [outer, ny, inner])
 *   scatter_add:  y[o, idx[o, j, i], i] += src[o, j, i]
 *   index_select: y[o, j, i] = x[o, idx[j], i]
 *   index_add:    y[o, idx[j], i] += src[o, j, i]
 */
#define ST_DECL_INDEX(sfx, T, _)                                                               \
  void st_gather_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,        \
                       int64_t ni, int64_t inner ST_S);                                            \
  void st_scatter_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,     \
                        int64_t ni, int64_t inner ST_S);                                           \
  void st_scatter_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, \
                            int64_t ni, int64_t inner ST_S);                                       \
  void st_index_select_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,  \
                             int64_t ni, int64_t inner ST_S);                                      \
  void st_index_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,   \
                          int64_t ni, int64_t inner ST_S);
ST_ALL_TYPES(ST_DECL_INDEX, _)
ST_HALF_TYPES(ST_DECL_INDEX, _)
/* flat positions of the non-zero elements of a contiguous bool array; returns the count
 * written (at most cap) */
int64_t st_nonzero_u8(const uint8_t* x, int64_t n, int64_t* out, int64_t cap ST_S);

/* image patches for convolution and pooling, per (batch*channel) plane of H x W:
 *   im2col: cols[b, c, i, j, oh, ow] = x[b, c, oh*sh - pt + i*dh, ow*sw - pl + j*dw] (0 outside)
 *           with cols laid out [B, C*kh*kw, OH*OW]; B counts images, C channels
 *   col2im: the adjoint (sums patches back into a zeroed image of the same layout)
 *   maxpool2d_index: flat index (within H*W) of each window's maximum, NaN winning, -1 when the
 *           window covers only padding
 *   maxpool2d (float32, float64): the maxima themselves (-inf for a window over padding
 *           only) and, unless idx is NULL, the same indices, in one pass */
#define ST_DECL_CONV(sfx, T, _)                                                                 \
  void st_im2col_##sfx(const T* x, T* cols, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow ST_S);                       \
  void st_col2im_##sfx(const T* cols, T* x, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow ST_S);                       \
  void st_maxpool2d_index_##sfx(const T* x, int64_t* idx, int64_t planes, int64_t h, int64_t w, \
                                int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt,     \
                                int64_t pl, int64_t dh, int64_t dw, int64_t oh, int64_t ow ST_S);
ST_FLOAT_TYPES(ST_DECL_CONV, _)
ST_HALF_TYPES(ST_DECL_CONV, _)
#define ST_DECL_MAXPOOL(sfx, T, _)                                                              \
  void st_maxpool2d_##sfx(const T* x, T* y, int64_t* idx, int64_t planes, int64_t h, int64_t w, \
                          int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt,           \
                          int64_t pl, int64_t dh, int64_t dw, int64_t oh, int64_t ow ST_S);
ST_FLOAT_TYPES(ST_DECL_MAXPOOL, _)

/* counter-based random numbers (Philox-4x32-10): element i depends only on (seed, offset + i),
 * so CPU and CUDA produce the same stream */
#define ST_DECL_RANDOM(sfx, T, _)                                                          \
  void st_uniform_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double low,       \
                        double high ST_S);                                                      \
  void st_normal_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double mean,       \
                       double std ST_S);
ST_FLOAT_TYPES(ST_DECL_RANDOM, _)
ST_HALF_TYPES(ST_DECL_RANDOM, _)
void st_randint_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset, int64_t low,
                    int64_t high ST_S);
/* a uniformly random permutation of 0..n-1 (Fisher-Yates; step i draws from block offset + i) */
void st_randperm_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset ST_S);

/* ---- fused training kernels: optimizer updates, batch norm, softmax cross entropy -------- */
/* Optimizer updates, in place over n contiguous elements, PyTorch's rules. g is read only; it is
 * negated first when maximize, then weight_decay * p is added (L2) unless the decay is decoupled.
 *   sgd:     buf = first ? g : momentum * buf + (1 - dampening) * g;
 *            g = nesterov ? g + momentum * buf : buf;  p -= lr * g.  buf is NULL (and unused)
 *            when momentum == 0, then p -= lr * g.
 *   adam:    decoupled (AdamW): p *= 1 - lr * weight_decay.  m = b1 m + (1-b1) g,
 *            v = b2 v + (1-b2) g^2; with amsgrad (vmax not NULL) vmax = max(vmax, v) and vmax
 *            replaces v below; p -= lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps), where
 *            bias1 = 1 - b1^t and bias2 = 1 - b2^t are passed in.
 *   rmsprop: sq = alpha sq + (1-alpha) g^2; centered (gavg not NULL): gavg = alpha gavg +
 *            (1-alpha) g, avg = sqrt(sq - gavg^2) + eps, else avg = sqrt(sq) + eps;
 *            momentum > 0 (buf not NULL): buf = momentum buf + g / avg, p -= lr buf;
 *            else p -= lr g / avg.
 *   adagrad: sum += g^2; p -= clr * g / (sqrt(sum) + eps)   (clr: the decayed learning rate) */
#define ST_DECL_OPTIM(sfx, T, _)                                                               \
  void st_sgd_step_##sfx(T* p, const T* g, T* buf, int64_t n, double lr, double momentum,      \
                         double dampening, double weight_decay, int32_t nesterov,             \
                         int32_t maximize, int32_t first ST_S);                               \
  void st_adam_step_##sfx(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr,         \
                          double beta1, double beta2, double eps, double weight_decay,         \
                          int32_t decoupled, int32_t maximize, double bias1,                   \
                          double bias2 ST_S);                                                  \
  void st_rmsprop_step_##sfx(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr,   \
                             double alpha, double eps, double weight_decay, double momentum,   \
                             int32_t maximize ST_S);                                           \
  void st_adagrad_step_##sfx(T* p, const T* g, T* sum, int64_t n, double clr, double eps,      \
                             double weight_decay, int32_t maximize ST_S);
ST_FLOAT_TYPES(ST_DECL_OPTIM, _)
#ifndef ST_CUDA_ABI
/* The same SGD and Adam updates over a list of `count` tensors (CPU): p[i], g[i] and the
 * state tables hold each tensor's pointer, n[i] its elements; buf (SGD without momentum) and
 * vmax (Adam without amsgrad) may be NULL tables. One call serves a whole parameter list, its
 * elements split evenly over the threads. */
#define ST_DECL_OPTIM_MULTI(sfx, T, _)                                                         \
  void st_sgd_step_multi_##sfx(T* const* p, const T* const* g, T* const* buf, const int64_t* n, \
                               int64_t count, double lr, double momentum, double dampening,    \
                               double weight_decay, int32_t nesterov, int32_t maximize,        \
                               int32_t first);                                                 \
  void st_adam_step_multi_##sfx(T* const* p, const T* const* g, T* const* m, T* const* v,      \
                                T* const* vmax, const int64_t* n, int64_t count, double lr,    \
                                double beta1, double beta2, double eps, double weight_decay,   \
                                int32_t decoupled, int32_t maximize, double bias1,             \
                                double bias2);
ST_FLOAT_TYPES(ST_DECL_OPTIM_MULTI, _)
#endif
ST_HALF_TYPES(ST_DECL_OPTIM, _)

/* Batch normalization of x viewed as [outer, c, inner] (channel axis in the middle), contiguous.
 *   stats:    mean[c] and biased var[c] over outer and inner
 *   apply:    y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]
 *             (weight, bias may be NULL: 1 and 0)
 *   backward: with xhat = (x - mean) * invstd and the batch statistics of the forward,
 *             dbias[c] = sum dy, dweight[c] = sum dy * xhat, and
 *             dx = weight[c] * invstd / M * (M dy - dbias[c] - xhat dweight[c]),  M = outer*inner;
 *             dx, dweight, dbias may each be NULL when not wanted; weight may be NULL (1). */
#define ST_DECL_BNORM(sfx, T, _)                                                               \
  void st_batch_norm_stats_##sfx(const T* x, T* mean, T* var, int64_t outer, int64_t c,        \
                                 int64_t inner ST_S);                                          \
  void st_batch_norm_apply_##sfx(const T* x, const T* mean, const T* var, const T* weight,     \
                                 const T* bias, T* y, int64_t outer, int64_t c, int64_t inner, \
                                 double eps ST_S);                                             \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* var,      \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t outer, int64_t c, int64_t inner, double eps ST_S);
ST_FLOAT_TYPES(ST_DECL_BNORM, _)

/* Layer normalization over the rows of x[rows, n] (the normalized trailing dims flattened),
 * contiguous. Each row's mean is a first pass and its biased variance a second pass about that
 * mean (two-pass, no cancellation), both accumulated in double; mean[r] and
 * rstd[r] = 1 / sqrt(var + eps) are written in T for the backward, and
 *   forward:  y = (x - mean[r]) * rstd[r] * weight[j] + bias[j]  (weight, bias may be NULL)
 *   backward: with xhat = (x - mean) * rstd and gw = dy * weight[j] (dy without weight):
 *             dx = rstd * (gw - mean_j gw - xhat * mean_j (gw * xhat)),
 *             dweight[j] = sum_r dy * xhat, dbias[j] = sum_r dy, each column summed in row
 *             order in double (the same bits for any thread count); dx, dweight, dbias may
 *             each be NULL when not wanted.
 * Group normalization is the same over [batch * groups, n] rows, n = (channels / groups) *
 * inner, with weight and bias per channel (channel = (row % groups) * (channels / groups) +
 * j / inner); its dweight, dbias sum each channel over the batch and inner, in order. */
#define ST_DECL_LNORM(sfx, T, _)                                                               \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t rows, int64_t n, double eps ST_S);                          \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias, int64_t rows, \
                                    int64_t n ST_S);                                           \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t batch, int64_t channels, int64_t groups, int64_t inner,     \
                           double eps ST_S);                                                   \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t batch, int64_t channels, int64_t groups,           \
                                    int64_t inner ST_S);
ST_FLOAT_TYPES(ST_DECL_LNORM, _)
/* float16/bfloat16: x, y, weight, bias and the gradients in the 16-bit dtype, the statistics
 * (mean, var, rstd) float32 */
#define ST_DECL_NORM_HALF(sfx, T, _)                                                           \
  void st_batch_norm_stats_##sfx(const T* x, float* mean, float* var, int64_t outer, int64_t c, \
                                 int64_t inner ST_S);                                          \
  void st_batch_norm_apply_##sfx(const T* x, const float* mean, const float* var,              \
                                 const T* weight, const T* bias, T* y, int64_t outer,          \
                                 int64_t c, int64_t inner, double eps ST_S);                   \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* var, const T* weight, T* dx, T* dweight,      \
                                    T* dbias, int64_t outer, int64_t c, int64_t inner,         \
                                    double eps ST_S);                                          \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t rows, int64_t n, double eps ST_S);             \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t rows, int64_t n ST_S);                   \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t batch, int64_t channels, int64_t groups,       \
                           int64_t inner, double eps ST_S);                                    \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t batch, int64_t channels, int64_t groups, \
                                    int64_t inner ST_S);
ST_HALF_TYPES(ST_DECL_NORM_HALF, _)

/* Softmax cross entropy over the rows of x[rows, c] with class-index targets, per row:
 *   loss[r] = -(1 - s) w[t] logp[r, t] - s / c * sum_j w[j] logp[r, j]
 * with logp = log_softmax(x), t = target[r], s the label smoothing, w the class weights (NULL:
 * all 1). Rows whose target is ignore_index get loss 0 and gradient 0. lse[r] (the row's
 * log-sum-exp) is written for the backward, which computes dx[r, j] = dloss[r] *
 *   (p[r, j] ((1 - s) w[t] + s / c * sum_k w[k]) - (1 - s) w[t] [j == t] - s / c * w[j]).
 * Targets other than ignore_index are in [0, c) (Python checks). */
#define ST_DECL_XENT(sfx, T, _)                                                                \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, T* loss,      \
                             T* lse, int64_t rows, int64_t c, int64_t ignore_index,            \
                             double smoothing ST_S);                                           \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const T* lse, const T* dloss, T* dx, int64_t rows,       \
                                      int64_t c, int64_t ignore_index, double smoothing ST_S);
ST_FLOAT_TYPES(ST_DECL_XENT, _)
/* float16/bfloat16 logits: the per-row loss and lse (and so dloss) are float32 */
#define ST_DECL_XENT_HALF(sfx, T, _)                                                           \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, float* loss,  \
                             float* lse, int64_t rows, int64_t c, int64_t ignore_index,        \
                             double smoothing ST_S);                                           \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const float* lse, const float* dloss, T* dx,             \
                                      int64_t rows, int64_t c, int64_t ignore_index,           \
                                      double smoothing ST_S);
ST_HALF_TYPES(ST_DECL_XENT_HALF, _)

/* Recurrent cells, fused: one pass over [batch, hidden] after a step's matrix products. All
 * operands are contiguous row-major; bias and saved may be NULL.
 * LSTM, gate order i, f, g, o: a = gates_x + gates_h + bias  ([batch, 4*hidden], bias [4*hidden])
 *   i, f, o = sigmoid(a_i, a_f, a_o), g = tanh(a_g); c = f * c_prev + i * g; h = o * tanh(c).
 *   saved [batch, 4*hidden] receives i, f, g, o for the backward, which from them, c_prev, c and
 *   the gradients dh, dc of h and c writes dgates (w.r.t. a, [batch, 4*hidden]) and dc_prev.
 * GRU, gate order r, z, n: gates_x [batch, 3*hidden] is the input side (its bias included),
 *   gates_h the hidden side without bias, bias_h [3*hidden] the hidden side's bias:
 *   r = sigmoid(x_r + h_r + b_r), z = sigmoid(x_z + h_z + b_z), hn = h_n + b_n,
 *   n = tanh(x_n + r * hn), h = (1 - z) * n + z * h_prev.
 *   saved [batch, 4*hidden] receives r, z, n, hn; the backward writes dgates_x (w.r.t. the
 *   input side), dgates_h (w.r.t. the hidden side incl. its bias), both [batch, 3*hidden], and
 *   dh_prev. */
#define ST_DECL_RNN(sfx, T, _)                                                                 \
  void st_lstm_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias, const T* c_prev,  \
                          T* h, T* c, T* saved, int64_t batch, int64_t hidden ST_S);           \
  void st_lstm_cell_backward_##sfx(const T* saved, const T* c_prev, const T* c, const T* dh,   \
                                   const T* dc, T* dgates, T* dc_prev, int64_t batch,          \
                                   int64_t hidden ST_S);                                       \
  void st_gru_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias_h, const T* h_prev, \
                         T* h, T* saved, int64_t batch, int64_t hidden ST_S);                  \
  void st_gru_cell_backward_##sfx(const T* saved, const T* h_prev, const T* dh, T* dgates_x,   \
                                  T* dgates_h, T* dh_prev, int64_t batch, int64_t hidden ST_S);
ST_FLOAT_TYPES(ST_DECL_RNN, _)

/* A recurrent layer's whole time loop for one direction (loop: rnn_seq.h), forward and
 * backward. mode: 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu (gates G = 4, 3, 1, 1); reverse != 0
 * runs the steps from the last time index to the first. Row-major, contiguous, time-major:
 *   gates_x [steps, batch, G*hidden] the input side of every step (LSTM and RNN: both biases
 *   included; GRU: b_ih included), w_hh [G*hidden, hidden], bias_h [3*hidden] (GRU's b_hh, NULL
 *   for none or the other modes), h0, c0 [batch, hidden] (c0: LSTM only, else NULL).
 * Forward writes out [steps, batch, hidden] (h of every time index), h_n, c_n [batch, hidden]
 * (c_n: LSTM only) and, when not NULL, what the backward needs: saved [steps, batch,
 * 4*hidden] (LSTM, GRU: the cells' saved rows), cells [steps, batch, hidden] (LSTM: c).
 * work: scratch of batch * 6 * hidden elements.
 * Backward takes the forward's operands and results plus d_out [steps, batch, hidden], d_hn,
 * d_cn [batch, hidden] (d_cn: LSTM only) and writes d_gates_x [steps, batch, G*hidden],
 * d_gates_h (GRU only: the hidden side incl. its bias, [steps, batch, 3*hidden]; else NULL),
 * d_w_hh [G*hidden, hidden], d_h0, d_c0 (LSTM only). work: batch * 4 * hidden elements. */
#define ST_DECL_RNN_SEQ(sfx, T, _)                                                             \
  void st_rnn_seq_forward_##sfx(int32_t mode, int32_t reverse, const T* gates_x,               \
                                const T* w_hh, const T* bias_h, const T* h0, const T* c0,      \
                                T* out, T* h_n, T* c_n, T* saved, T* cells, T* work,           \
                                int64_t steps, int64_t batch, int64_t hidden ST_S);            \
  void st_rnn_seq_backward_##sfx(int32_t mode, int32_t reverse, const T* w_hh, const T* h0,    \
                                 const T* c0, const T* out, const T* saved, const T* cells,    \
                                 const T* d_out, const T* d_hn, const T* d_cn, T* d_gates_x,   \
                                 T* d_gates_h, T* d_w_hh, T* d_h0, T* d_c0, T* work,           \
                                 int64_t steps, int64_t batch, int64_t hidden ST_S);
ST_FLOAT_TYPES(ST_DECL_RNN_SEQ, _)

/* Scaled dot-product attention, fused: the (L, S) score matrix is never stored. q [B, L, E],
 * k [B, S, E], v [B, S, Ev], out [B, L, Ev], lse [B, L], all contiguous. With s = scale * q k^T
 * restricted to keys j <= i when causal (PyTorch's tril convention), the forward writes
 * out = softmax(s) v and lse[i] = log sum_j exp(s_ij), keys taken a block at a time (online
 * softmax). A row with no key gives out = 0 and lse = -inf. The backward, from dout and the
 * forward's out and lse, writes delta[i] = sum_c dout[i, c] out[i, c] (a [B, L] workspace) and
 * dq, dk, dv (overwritten), recomputing p = exp(s - lse) blockwise:
 *   dv = p^T dout, ds = p (dout v^T - delta), dq = scale ds k, dk = scale ds^T q.
 * E and Ev are at most 256 (Python checks). */
#define ST_DECL_ATTENTION(sfx, T, _)                                                           \
  void st_attention_##sfx(const T* q, const T* k, const T* v, T* out, T* lse, int64_t batch,   \
                          int64_t l, int64_t s, int64_t e, int64_t ev, double scale,           \
                          int32_t causal ST_S);                                                \
  void st_attention_backward_##sfx(const T* q, const T* k, const T* v, const T* out,           \
                                   const T* dout, const T* lse, T* delta, T* dq, T* dk, T* dv, \
                                   int64_t batch, int64_t l, int64_t s, int64_t e, int64_t ev, \
                                   double scale, int32_t causal ST_S);
ST_FLOAT_TYPES(ST_DECL_ATTENTION, _)
#ifndef ST_CUDA_ABI
/* float16/bfloat16 (CPU): the same, with the row statistics lse and delta in float32; groups
 * of whole batch entries are computed in float32 and rounded once */
#define ST_DECL_ATTENTION_HALF(sfx, T, _)                                                      \
  void st_attention_##sfx(const T* q, const T* k, const T* v, T* out, float* lse,             \
                          int64_t batch, int64_t l, int64_t s, int64_t e, int64_t ev,         \
                          double scale, int32_t causal);                                      \
  void st_attention_backward_##sfx(const T* q, const T* k, const T* v, const T* out,          \
                                   const T* dout, const float* lse, float* delta, T* dq,      \
                                   T* dk, T* dv, int64_t batch, int64_t l, int64_t s,         \
                                   int64_t e, int64_t ev, double scale, int32_t causal);
ST_HALF_TYPES(ST_DECL_ATTENTION_HALF, _)
/* float32/float64 (CPU): the same with q, k, v, out (and dout, dq, dk, dv) laid out as views:
 * `lay` holds four int64 per tensor, in the order q, k, v, out (forward) or q, k, v, out, dout,
 * dq, dk, dv (backward): heads H, outer stride, head stride, row stride. Batch entry b starts at
 * (b / H) * outer + (b % H) * head, its rows are `row` apart and each row is contiguous. So
 * q, k and v can be parts of one projected (N, L, 3, H, D) tensor and out an (N, L, H, D) one,
 * without a copy. Rows written (out, dq, dk, dv) must not overlap. */
#define ST_DECL_ATTENTION_STRIDED(sfx, T, _)                                                   \
  void st_attention_strided_##sfx(const T* q, const T* k, const T* v, T* out, T* lse,          \
                                  const int64_t* lay, int64_t batch, int64_t l, int64_t s,     \
                                  int64_t e, int64_t ev, double scale, int32_t causal);        \
  void st_attention_backward_strided_##sfx(                                                    \
      const T* q, const T* k, const T* v, const T* out, const T* dout, const T* lse, T* delta, \
      T* dq, T* dk, T* dv, const int64_t* lay, int64_t batch, int64_t l, int64_t s, int64_t e, \
      int64_t ev, double scale, int32_t causal);
ST_FLOAT_TYPES(ST_DECL_ATTENTION_STRIDED, _)
#endif

/* ---- fused elementwise programs (graph mode) ---------------------------------------------- */
/* Fused elementwise programs (graph mode). Registers hold one element per lane. Instruction i is
 * prog[4i..4i+3] = (opcode, dst, a, b): unary ops compute dst = f(reg a; consts[b], consts[b+1])
 * (alpha, beta, as the unary kernels take them), binary ops dst = f(reg a, reg b), ST_FUSED_CONST
 * loads dst = consts[b], ST_FUSED_LOAD loads dst = input a at the element's position.
 * Input j is read at index (i / in_shape[2j]) % in_shape[2j+1] for element i of n (inner, period):
 * (1, n) is a full-length input, (1, 1) a scalar, (1, C) a row bias, (H*W, C) a channel bias.
 * Output k is written from register out_regs[k] at index i (contiguous, length n).
 * Limits, validated in Python: ninstr <= ST_FUSED_MAX_INSTR (64), nin <= 16, nout <= 8,
 * registers < ST_FUSED_MAX_REGS (32). All arrays (prog, consts, inputs, in_shape, outputs,
 * out_regs) are HOST memory on both backends; the pointers inside inputs/outputs are device
 * pointers on CUDA (the CUDA wrapper packs everything into one by-value kernel parameter).
 * Every register an instruction or output reads was written by an earlier instruction, and
 * consts has every index the program reads, at most ST_FUSED_MAX_CONSTS + 2 of them (Python
 * appends two zeros, the parameters of the unary ops that take none). Each instruction rounds
 * to the dtype, so a program computes exactly what its ops compute one kernel at a time. An
 * output may be a full-length input's buffer (each element is read before it is written), not
 * a broadcast one's. */
#define ST_FUSED_BINARY_OPS(X, ...)                                                       \
  X(add, __VA_ARGS__) X(sub, __VA_ARGS__) X(mul, __VA_ARGS__) X(div, __VA_ARGS__)          \
  X(pow, __VA_ARGS__) X(maximum, __VA_ARGS__) X(minimum, __VA_ARGS__)
/* enums rather than #defines, so that cffi (which reads the preprocessed header) binds them */
enum st_fused_limits {
  ST_FUSED_MAX_INSTR = 64,
  ST_FUSED_MAX_REGS = 32,
  ST_FUSED_MAX_INPUTS = 16,
  ST_FUSED_MAX_OUTPUTS = 8,
  ST_FUSED_MAX_CONSTS = 128
};
/* opcodes generated from the op lists, so the numbering cannot drift from them */
#define ST_FUSED_U_CODE(op, _) ST_FUSED_U_##op,
#define ST_FUSED_B_CODE(op, _) ST_FUSED_B_##op,
enum st_fused_opcode {
  ST_FUSED_LOAD = 0,
  ST_FUSED_CONST = 1,
  ST_UNARY_FLOAT_OPS(ST_FUSED_U_CODE, _) ST_FUSED_BINARY_OPS(ST_FUSED_B_CODE, _)
  ST_FUSED_NUM_OPS
};
#define ST_DECL_FUSED(sfx, T, _)                                                              \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const T* consts,                   \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,        \
                      void* const* outputs, const int32_t* out_regs, int64_t nout,            \
                      int64_t n ST_S);
ST_FLOAT_TYPES(ST_DECL_FUSED, _)
/* the 16-bit floats take their constants in float: the unary ops' parameters as the unfused
 * kernels take alpha and beta; ST_FUSED_CONST rounds its value to the dtype, as every
 * instruction's result is rounded */
#define ST_DECL_FUSED_LOW(sfx, T, _)                                                          \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const float* consts,               \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,        \
                      void* const* outputs, const int32_t* out_regs, int64_t nout,            \
                      int64_t n ST_S);
ST_HALF_TYPES(ST_DECL_FUSED_LOW, _)

#ifndef ST_CUDA_ABI /* host-side services of the CPU library; CUDA memory comes from CuPy */
/* memory: a caching allocator. Freed blocks are kept by size class and reused, so a
 * steady-state training loop stops asking the OS for pages (fresh pages cost a page fault
 * each); large blocks are 2 MiB aligned and advised to use huge pages. */
#define ST_DECL_ALLOC(sfx, T, _) T* st_alloc_##sfx(int64_t n);
ST_CAST_TYPES(ST_DECL_ALLOC, _)
void st_free(void* p);
int64_t st_cached_bytes(void);
int64_t st_allocated_bytes(void);
/* high-water marks of st_allocated_bytes and of allocated + cached since the last reset */
int64_t st_peak_allocated_bytes(void);
int64_t st_peak_reserved_bytes(void);
void st_reset_peak_bytes(void);
void st_empty_cache(void);
void st_set_cache_limit(int64_t bytes);

/* library facts */
int32_t st_num_threads(void);
void st_set_num_threads(int32_t n);
/* whether the kernels built twice run their AVX-512 build (1) or the AVX2 one (0): the float32
 * unary kernels and their gradients (both builds give the same bits) and the recurrent layers'
 * few-row step products (which sum in another order). enable 0 or 1 chooses (1 only where the
 * CPU and OS support AVX-512), -1 only asks. */
int32_t st_cpu_avx512(int32_t enable);
#endif /* ST_CUDA_ABI */

#ifdef __cplusplus
}
#endif

#endif /* SINGA_TENSOR_H_ */
