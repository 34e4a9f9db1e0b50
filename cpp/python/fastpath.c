/* singa_tensor._fastpath: the fixed cost of the commonest op calls, in C.
 *
 * An elementwise op on tensors of one dtype, one shape and contiguous memory (the bulk of a
 * training step's small ops) needs no promotion, no broadcasting and no strided loop: only a
 * new output buffer, a new Tensor around it and one kernel call. In Python those three cost
 * about 2 us; here they cost a few hundred nanoseconds.
 *
 * The module knows nothing of ops: Python hands it, at import, the Tensor and Storage classes
 * (whose __slots__ it reads and writes through their member descriptors), the dtypes with their
 * item sizes, the allocator of small buffers, and per op the kernel addresses by dtype (taken
 * from the cffi binding of the kernel library). Every call that is not the plain case returns
 * None, and the Python op, which validates everything, runs as before: this module never
 * raises for a user's input, it only declines it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* the head of a cffi cdata object: the pointer it holds follows the ctype. set_up() checks
 * this layout against a pointer of known value and turns the fast path off when it differs. */
typedef struct {
  PyObject_HEAD
  PyObject *c_type;
  char *c_data;
} CDataHead;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

enum { T_STORAGE, T_OFFSET, T_SHAPE, T_STRIDES, T_CONTIG, T_DTYPE, T_DEVICE, T_BE, T_RG, T_NODE,
       T_COUNT };
static const char *const tensor_slots[T_COUNT] = {
    "_storage", "_offset", "_shape", "_strides", "_contig", "dtype", "_device", "_be",
    "requires_grad", "_node"};
enum { S_PTR, S_NBYTES, S_ARRAY, S_NP, S_VERSION, S_COUNT };
static const char *const storage_slots[S_COUNT] = {"ptr", "nbytes", "_array", "_np", "version"};

#define MAX_DTYPES 8
#define MAX_DIMS 32 /* tensor.MAX_DIMS: Python raises for more */
#define MAX_KERNELS 256
/* the largest buffer, in bytes, that cffi's allocator makes (the caching allocator makes the
 * larger ones) */
static Py_ssize_t small_bytes = 0;
/* kernels over this many elements run without the GIL, as cffi runs them */
#define NOGIL_NUMEL (1 << 15)

typedef void (*binary_fn)(const void *, const void *, void *, int32_t, const int64_t *,
                          const int64_t *, const int64_t *);
typedef void (*unary_fn)(const void *, void *, int64_t, double, double);

static struct {
  int ready;
  PyTypeObject *tensor, *storage, *cdata;
  Py_ssize_t toff[T_COUNT], soff[S_COUNT];
  PyObject *cpu_be;       /* the CPU backend module (a tensor's _be) */
  PyObject *execution;    /* singa_tensor._execution: running_count > 0 while graph mode runs */
  PyObject *running_name; /* "running_count" */
  PyObject *autocast_name; /* "autocast_count" */
  PyObject *small_alloc;  /* cffi allocator: small_alloc(array ctype, n) */
  PyObject *big_empty;    /* backend.cpu.empty(numel, dtype) -> Storage */
  PyObject *strides;      /* tensor._STRIDES: shape -> contiguous strides */
  PyObject *strides_fn;   /* tensor.contiguous_strides(shape), which fills it */
  PyObject *zero;
  int ndtypes;
  PyObject *dtype[MAX_DTYPES], *np_dtype[MAX_DTYPES], *array_type[MAX_DTYPES];
  Py_ssize_t itemsize[MAX_DTYPES];
  int nkernels;
  char kind[MAX_KERNELS]; /* 'b' binary, 'u' unary */
  void *fn[MAX_KERNELS][MAX_DTYPES];
} S;

static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *off) {
  PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
  if (d == NULL) return -1;
  int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
           ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
  if (ok) *off = ((PyMemberDescrObject *)d)->d_member->offset;
  Py_DECREF(d);
  if (!ok) {
    PyErr_Format(PyExc_TypeError, "_fastpath: %s.%s is not a __slots__ member", type->tp_name,
                 name);
    return -1;
  }
  return 0;
}

/* set_up(Tensor, Storage, cdata_type, probe, probe_value, cpu_backend, execution,
 *        small_alloc, small_bytes, big_empty, strides, strides_fn, dtypes)
 * probe is a cdata pointer whose address is probe_value; dtypes is a sequence of
 * (dtype, itemsize, numpy storage dtype, cffi array ctype). */
static PyObject *set_up(PyObject *self, PyObject *args) {
  PyObject *tensor, *storage, *cdata, *probe, *cpu_be, *execution, *small_alloc, *big_empty,
      *strides, *strides_fn, *dtypes;
  unsigned long long probe_value;
  Py_ssize_t small;
  if (!PyArg_ParseTuple(args, "O!O!O!OKOOOnOO!OO", &PyType_Type, &tensor, &PyType_Type,
                        &storage, &PyType_Type, &cdata, &probe, &probe_value, &cpu_be,
                        &execution, &small_alloc, &small, &big_empty, &PyDict_Type, &strides,
                        &strides_fn, &dtypes))
    return NULL;
  S.ready = 0;
  for (int i = 0; i < T_COUNT; i++)
    if (slot_offset((PyTypeObject *)tensor, tensor_slots[i], &S.toff[i]) < 0) return NULL;
  for (int i = 0; i < S_COUNT; i++)
    if (slot_offset((PyTypeObject *)storage, storage_slots[i], &S.soff[i]) < 0) return NULL;
  if (!PyObject_TypeCheck(probe, (PyTypeObject *)cdata)) {
    PyErr_SetString(PyExc_TypeError, "_fastpath: the probe is not a cdata object");
    return NULL;
  }
  PyObject *seq = PySequence_Fast(dtypes, "_fastpath: dtypes must be a sequence");
  if (seq == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > MAX_DTYPES) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "_fastpath: too many dtypes");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *d, *np, *at;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "OnOO", &d, &size, &np, &at)) {
      Py_DECREF(seq);
      return NULL;
    }
    Py_INCREF(d);
    Py_INCREF(np);
    Py_INCREF(at);
    S.dtype[i] = d;
    S.np_dtype[i] = np;
    S.array_type[i] = at;
    S.itemsize[i] = size;
  }
  Py_DECREF(seq);
  S.ndtypes = (int)n;
  S.tensor = (PyTypeObject *)tensor;
  S.storage = (PyTypeObject *)storage;
  S.cdata = (PyTypeObject *)cdata;
  Py_INCREF(tensor);
  Py_INCREF(storage);
  Py_INCREF(cdata);
  Py_INCREF(cpu_be);
  Py_INCREF(execution);
  Py_INCREF(small_alloc);
  Py_INCREF(big_empty);
  Py_INCREF(strides);
  Py_INCREF(strides_fn);
  S.strides = strides;
  S.strides_fn = strides_fn;
  S.cpu_be = cpu_be;
  S.execution = execution;
  S.small_alloc = small_alloc;
  S.big_empty = big_empty;
  small_bytes = small;
  if (S.running_name == NULL) S.running_name = PyUnicode_InternFromString("running_count");
  if (S.autocast_name == NULL) S.autocast_name = PyUnicode_InternFromString("autocast_count");
  if (S.zero == NULL) S.zero = PyLong_FromLong(0);
  if (S.running_name == NULL || S.autocast_name == NULL || S.zero == NULL) return NULL;
  /* the cdata layout check: without it, no fast path */
  S.ready = (uintptr_t)((CDataHead *)probe)->c_data == (uintptr_t)probe_value;
  return PyBool_FromLong(S.ready);
}

/* add_kernel(kind, addresses): kind "binary" or "unary", addresses one int per set-up dtype
 * (0 where the op has no kernel for it); returns the kernel's handle */
static PyObject *add_kernel(PyObject *self, PyObject *args) {
  const char *kind;
  PyObject *addrs;
  if (!PyArg_ParseTuple(args, "sO", &kind, &addrs)) return NULL;
  if (strcmp(kind, "binary") != 0 && strcmp(kind, "unary") != 0) {
    PyErr_Format(PyExc_ValueError, "_fastpath.add_kernel: unknown kind '%s'", kind);
    return NULL;
  }
  if (S.nkernels >= MAX_KERNELS) {
    PyErr_SetString(PyExc_ValueError, "_fastpath.add_kernel: kernel table full");
    return NULL;
  }
  PyObject *seq = PySequence_Fast(addrs, "_fastpath.add_kernel: addresses must be a sequence");
  if (seq == NULL) return NULL;
  if (PySequence_Fast_GET_SIZE(seq) != S.ndtypes) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "_fastpath.add_kernel: one address per dtype");
    return NULL;
  }
  int h = S.nkernels;
  for (int i = 0; i < S.ndtypes; i++) {
    void *p = PyLong_AsVoidPtr(PySequence_Fast_GET_ITEM(seq, i));
    if (p == NULL && PyErr_Occurred()) {
      Py_DECREF(seq);
      return NULL;
    }
    S.fn[h][i] = p;
  }
  Py_DECREF(seq);
  S.kind[h] = kind[0];
  S.nkernels++;
  return PyLong_FromLong(h);
}

static inline int dtype_index(PyObject *d) {
  for (int i = 0; i < S.ndtypes; i++)
    if (S.dtype[i] == d) return i;
  return -1;
}

/* whether a counter of _execution is non-zero (a counter that cannot be read counts) */
static inline int counting(PyObject *name) {
  PyObject *c = PyObject_GetAttr(S.execution, name);
  if (c == NULL) {
    PyErr_Clear();
    return 1;
  }
  int r = c == S.zero ? 0 : PyObject_IsTrue(c);
  Py_DECREF(c);
  if (r < 0) PyErr_Clear();
  return r != 0;
}

/* whether graph mode records or replays: the Python path's business (it records kernels) */
static inline int in_graph(void) { return counting(S.running_name); }

/* ... or, for the binary calls (which stand for the op's whole entry), whether an autocast
 * region is open: autocast may cast their operands */
static inline int busy(void) { return in_graph() || counting(S.autocast_name); }

/* a contiguous CPU tensor's first element, or NULL */
static inline char *data_of(PyObject *t, Py_ssize_t itemsize) {
  PyObject *st = SLOT(t, S.toff[T_STORAGE]);
  if (st == NULL || !Py_IS_TYPE(st, S.storage)) return NULL;
  PyObject *p = SLOT(st, S.soff[S_PTR]);
  if (p == NULL || !PyObject_TypeCheck(p, S.cdata)) return NULL;
  Py_ssize_t off = PyLong_AsSsize_t(SLOT(t, S.toff[T_OFFSET]));
  if (off < 0) {
    PyErr_Clear();
    return NULL;
  }
  return ((CDataHead *)p)->c_data + off * itemsize;
}

/* numel of a shape tuple of non-negative ints, -1 when it is anything else */
static inline Py_ssize_t numel_of(PyObject *shape) {
  if (!PyTuple_CheckExact(shape)) return -1;
  Py_ssize_t n = 1, nd = PyTuple_GET_SIZE(shape);
  for (Py_ssize_t i = 0; i < nd; i++) {
    Py_ssize_t s = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
    if (s < 0) {
      PyErr_Clear();
      return -1;
    }
    if (s != 0 && n > PY_SSIZE_T_MAX / 64 / s) return -1; /* far beyond memory: Python says so */
    n *= s;
  }
  return n;
}

/* a new contiguous tensor of n elements of dtype di, uninitialised; NULL on error (exception
 * set) */
static PyObject *new_tensor(PyObject *shape, int di, PyObject *device, PyObject *be,
                            Py_ssize_t n) {
  Py_ssize_t nbytes = n * S.itemsize[di];
  PyObject *storage;
  if (nbytes <= small_bytes) {
    PyObject *count = PyLong_FromSsize_t(n ? n : 1);
    if (count == NULL) return NULL;
    PyObject *cd = PyObject_CallFunctionObjArgs(S.small_alloc, S.array_type[di], count, NULL);
    Py_DECREF(count);
    if (cd == NULL) return NULL;
    storage = S.storage->tp_alloc(S.storage, 0);
    if (storage == NULL) {
      Py_DECREF(cd);
      return NULL;
    }
    PyObject *nb = PyLong_FromSsize_t(nbytes);
    if (nb == NULL) {
      Py_DECREF(cd);
      Py_DECREF(storage);
      return NULL;
    }
    SLOT(storage, S.soff[S_PTR]) = cd;
    SLOT(storage, S.soff[S_NBYTES]) = nb;
    Py_INCREF(Py_None);
    SLOT(storage, S.soff[S_ARRAY]) = Py_None;
    Py_INCREF(S.np_dtype[di]);
    SLOT(storage, S.soff[S_NP]) = S.np_dtype[di];
    Py_INCREF(S.zero);
    SLOT(storage, S.soff[S_VERSION]) = S.zero;
  } else {
    PyObject *count = PyLong_FromSsize_t(n);
    if (count == NULL) return NULL;
    storage = PyObject_CallFunctionObjArgs(S.big_empty, count, S.dtype[di], NULL);
    Py_DECREF(count);
    if (storage == NULL) return NULL;
  }
  PyObject *out = S.tensor->tp_alloc(S.tensor, 0);
  if (out == NULL) {
    Py_DECREF(storage);
    return NULL;
  }
  /* the canonical strides of the shape (an input's may differ on dimensions of size 1) */
  PyObject *strides = PyDict_GetItemWithError(S.strides, shape);
  if (strides != NULL) {
    Py_INCREF(strides);
  } else if (PyErr_Occurred() ||
             (strides = PyObject_CallOneArg(S.strides_fn, shape)) == NULL) {
    Py_DECREF(out);
    Py_DECREF(storage);
    return NULL;
  }
  SLOT(out, S.toff[T_STRIDES]) = strides;
  Py_INCREF(shape);
  SLOT(out, S.toff[T_SHAPE]) = shape;
  Py_INCREF(S.dtype[di]);
  SLOT(out, S.toff[T_DTYPE]) = S.dtype[di];
  Py_INCREF(device);
  SLOT(out, S.toff[T_DEVICE]) = device;
  Py_INCREF(be);
  SLOT(out, S.toff[T_BE]) = be;
  SLOT(out, S.toff[T_STORAGE]) = storage;
  Py_INCREF(S.zero);
  SLOT(out, S.toff[T_OFFSET]) = S.zero;
  Py_INCREF(Py_True);
  SLOT(out, S.toff[T_CONTIG]) = Py_True;
  Py_INCREF(Py_False);
  SLOT(out, S.toff[T_RG]) = Py_False;
  Py_INCREF(Py_None);
  SLOT(out, S.toff[T_NODE]) = Py_None;
  return out;
}

/* a new contiguous tensor shaped like t (dtype di, n elements) and its data in *po; NULL with
 * an exception on error, None (a new reference: decline) where its buffer cannot be read */
static PyObject *output_like(PyObject *t, int di, Py_ssize_t n, char **po) {
  PyObject *out = new_tensor(SLOT(t, S.toff[T_SHAPE]), di, SLOT(t, S.toff[T_DEVICE]), S.cpu_be,
                             n);
  if (out == NULL) return NULL;
  *po = data_of(out, S.itemsize[di]);
  if (*po == NULL) {
    Py_DECREF(out);
    Py_RETURN_NONE;
  }
  return out;
}

/* is t a contiguous CPU tensor with all the slots this module reads set? */
static inline int plain(PyObject *t) {
  if (!Py_IS_TYPE(t, S.tensor)) return 0;
  for (int i = 0; i < T_COUNT; i++)
    if (SLOT(t, S.toff[i]) == NULL) return 0;
  return SLOT(t, S.toff[T_CONTIG]) == Py_True && SLOT(t, S.toff[T_BE]) == S.cpu_be;
}

#define DECLINE() Py_RETURN_NONE

/* the value of Python number v as an element of dtype di (float32, float64, int32 or int64),
 * in *out; 0 where the Python path would promote, round differently or refuse: only numbers
 * that the dtype holds exactly, or floats into float dtypes (rounded to nearest, as numpy
 * rounds them) */
static int scalar_value(PyObject *v, int di, void *out) {
  int is_float = PyFloat_CheckExact(v), is_int = PyLong_CheckExact(v);
  if (!is_float && !is_int) return 0; /* bool and other numbers: the Python path */
  long long iv = 0;
  if (is_int) {
    int overflow = 0;
    iv = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (iv == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 0;
    }
  }
  /* set_up's dtypes start float32, float64, int32, int64 (ops/_fast.py DTYPES) */
  if (di == 0) { /* float32 */
    if (is_int && (iv > (1LL << 24) || iv < -(1LL << 24))) return 0;
    *(float *)out = is_float ? (float)PyFloat_AS_DOUBLE(v) : (float)iv;
    return 1;
  }
  if (di == 1) { /* float64 */
    if (is_int && (iv > (1LL << 53) || iv < -(1LL << 53))) return 0;
    *(double *)out = is_float ? PyFloat_AS_DOUBLE(v) : (double)iv;
    return 1;
  }
  if (is_float) return 0; /* an integer tensor and a float: float32 result */
  if (di == 2) { /* int32 */
    if (iv > INT32_MAX || iv < INT32_MIN) return 0;
    *(int32_t *)out = (int32_t)iv;
    return 1;
  }
  if (di == 3) { /* int64 */
    *(int64_t *)out = (int64_t)iv;
    return 1;
  }
  return 0;
}

/* t op s (or s op t when scalar_first) for a contiguous CPU tensor t and a Python number s,
 * the number broadcast through a zero stride, as the Python path runs it; or None */
static PyObject *with_scalar(PyObject *t, PyObject *s, long h, int scalar_first) {
  if (!plain(t)) DECLINE();
  int di = dtype_index(SLOT(t, S.toff[T_DTYPE]));
  if (di < 0 || di > 3 || S.fn[h][di] == NULL) DECLINE();
  union {
    float f;
    double d;
    int32_t i;
    int64_t l;
  } value;
  if (!scalar_value(s, di, &value)) DECLINE();
  if (busy()) DECLINE();
  Py_ssize_t n = numel_of(SLOT(t, S.toff[T_SHAPE]));
  if (n < 0) DECLINE();
  char *pt = data_of(t, S.itemsize[di]);
  if (pt == NULL) DECLINE();
  char *po;
  PyObject *out = output_like(t, di, n, &po);
  if (out == NULL || out == Py_None) return out;
  int64_t shape1 = (int64_t)n, one = 1, zero = 0;
  binary_fn f = (binary_fn)S.fn[h][di];
  const void *x = scalar_first ? (const void *)&value : pt;
  const void *y = scalar_first ? (const void *)pt : (const void *)&value;
  const int64_t *sx = scalar_first ? &zero : &one, *sy = scalar_first ? &one : &zero;
  if (n >= NOGIL_NUMEL) {
    Py_BEGIN_ALLOW_THREADS f(x, y, po, 1, &shape1, sx, sy);
    Py_END_ALLOW_THREADS
  } else {
    f(x, y, po, 1, &shape1, sx, sy);
  }
  return out;
}

/* binary(a, b, handle): a op b for two contiguous CPU tensors of one dtype and one shape, or
 * for such a tensor and a Python number (either side); else None */
static PyObject *binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3 || !S.ready) DECLINE();
  PyObject *a = args[0], *b = args[1];
  long h = PyLong_AsLong(args[2]);
  if (h < 0 || h >= S.nkernels || S.kind[h] != 'b') {
    PyErr_Clear();
    DECLINE();
  }
  int ta = Py_IS_TYPE(a, S.tensor), tb = Py_IS_TYPE(b, S.tensor);
  if (ta != tb) return ta ? with_scalar(a, b, h, 0) : with_scalar(b, a, h, 1);
  if (!plain(a) || !plain(b)) DECLINE();
  PyObject *d = SLOT(a, S.toff[T_DTYPE]);
  if (d != SLOT(b, S.toff[T_DTYPE]) || SLOT(a, S.toff[T_DEVICE]) != SLOT(b, S.toff[T_DEVICE]))
    DECLINE();
  int di = dtype_index(d);
  if (di < 0 || S.fn[h][di] == NULL) DECLINE();
  PyObject *sa = SLOT(a, S.toff[T_SHAPE]), *sb = SLOT(b, S.toff[T_SHAPE]);
  if (sa != sb) {
    int eq = PyObject_RichCompareBool(sa, sb, Py_EQ);
    if (eq < 0) PyErr_Clear();
    if (eq != 1) DECLINE();
  }
  if (busy()) DECLINE();
  Py_ssize_t n = numel_of(sa);
  if (n < 0) DECLINE();
  char *pa = data_of(a, S.itemsize[di]), *pb = data_of(b, S.itemsize[di]);
  if (pa == NULL || pb == NULL) DECLINE();
  char *po;
  PyObject *out = output_like(a, di, n, &po);
  if (out == NULL || out == Py_None) return out;
  int64_t shape1 = (int64_t)n, one = 1;
  binary_fn f = (binary_fn)S.fn[h][di];
  if (n >= NOGIL_NUMEL) {
    Py_BEGIN_ALLOW_THREADS f(pa, pb, po, 1, &shape1, &one, &one);
    Py_END_ALLOW_THREADS
  } else {
    f(pa, pb, po, 1, &shape1, &one, &one);
  }
  return out;
}

/* unary(x, handle, alpha, beta): f(x; alpha, beta) for a contiguous CPU tensor, or None */
static PyObject *unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 4 || !S.ready) DECLINE();
  PyObject *x = args[0];
  long h = PyLong_AsLong(args[1]);
  if (h < 0 || h >= S.nkernels || S.kind[h] != 'u') {
    PyErr_Clear();
    DECLINE();
  }
  double alpha = PyFloat_AsDouble(args[2]), beta = PyFloat_AsDouble(args[3]);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    DECLINE();
  }
  if (!plain(x)) DECLINE();
  int di = dtype_index(SLOT(x, S.toff[T_DTYPE]));
  if (di < 0 || S.fn[h][di] == NULL) DECLINE();
  if (in_graph()) DECLINE();
  Py_ssize_t n = numel_of(SLOT(x, S.toff[T_SHAPE]));
  if (n < 0) DECLINE();
  char *px = data_of(x, S.itemsize[di]);
  if (px == NULL) DECLINE();
  char *po;
  PyObject *out = output_like(x, di, n, &po);
  if (out == NULL || out == Py_None) return out;
  unary_fn f = (unary_fn)S.fn[h][di];
  if (n >= NOGIL_NUMEL) {
    Py_BEGIN_ALLOW_THREADS f(px, po, (int64_t)n, alpha, beta);
    Py_END_ALLOW_THREADS
  } else {
    f(px, po, (int64_t)n, alpha, beta);
  }
  return out;
}

/* empty(shape, dtype, device, be): Tensor._empty for a CPU tensor outside graph mode, else
 * None */
static PyObject *empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 4 || !S.ready || args[3] != S.cpu_be) DECLINE();
  PyObject *shape = args[0];
  if (!PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) > MAX_DIMS) DECLINE();
  int di = dtype_index(args[1]);
  if (di < 0) DECLINE();
  if (in_graph()) DECLINE();
  Py_ssize_t n = numel_of(shape);
  if (n < 0) DECLINE();
  return new_tensor(shape, di, args[2], S.cpu_be, n);
}

/* ---- the graph node ---------------------------------------------------------------------- */

static struct {
  PyObject *accumulate; /* autograd.AccumulateGrad */
  PyObject *fallback;   /* autograd's Python record, for what this one does not handle */
  PyObject *s_spec, *s_name, *s_out, *s_accum, *s_next, *s_needs, *s_meta, *s_float, *s_nondiff,
      *s_saved, *s_pack;
  PyObject *zero_edge_index;
} G;

static PyObject *set_autograd(PyObject *self, PyObject *args) {
  PyObject *acc, *fallback;
  if (!PyArg_ParseTuple(args, "OO", &acc, &fallback)) return NULL;
#define INTERN(field, text)                                        \
  if (G.field == NULL && (G.field = PyUnicode_InternFromString(text)) == NULL) return NULL;
  INTERN(s_spec, "spec")
  INTERN(s_name, "name")
  INTERN(s_out, "_out")
  INTERN(s_accum, "_accum")
  INTERN(s_next, "next")
  INTERN(s_needs, "needs_input_grad")
  INTERN(s_meta, "_outputs_meta")
  INTERN(s_float, "is_floating_point")
  INTERN(s_nondiff, "_non_diff")
  INTERN(s_saved, "_saved")
  INTERN(s_pack, "_pack_saved")
#undef INTERN
  if (G.zero_edge_index == NULL && (G.zero_edge_index = PyLong_FromLong(0)) == NULL) return NULL;
  Py_INCREF(acc);
  Py_INCREF(fallback);
  Py_XSETREF(G.accumulate, acc);
  Py_XSETREF(G.fallback, fallback);
  Py_RETURN_NONE;
}

/* the edge from input t to its producer: (node, output index), or (t's accumulator, 0) for a
 * leaf; new reference, NULL on error */
static PyObject *edge_of(PyObject *t) {
  PyObject *node = SLOT(t, S.toff[T_NODE]);
  if (node != NULL && node != Py_None) {
    PyObject *idx = PyObject_GetAttr(t, G.s_out);
    if (idx == NULL) return NULL;
    PyObject *e = PyTuple_Pack(2, node, idx);
    Py_DECREF(idx);
    return e;
  }
  PyObject *acc = PyObject_GetAttr(t, G.s_accum);
  if (acc == NULL) return NULL;
  if (acc == Py_None) {
    Py_DECREF(acc);
    acc = PyObject_CallOneArg(G.accumulate, t);
    if (acc == NULL) return NULL;
    if (PyObject_SetAttr(t, G.s_accum, acc) < 0) {
      Py_DECREF(acc);
      return NULL;
    }
  }
  PyObject *e = PyTuple_Pack(2, acc, G.zero_edge_index);
  Py_DECREF(acc);
  return e;
}

/* record(spec, ctx, inputs, outputs): autograd.record, with the single-output case in C */
static PyObject *record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "record(spec, ctx, inputs, outputs)");
    return NULL;
  }
  PyObject *spec = args[0], *ctx = args[1], *inputs = args[2], *out = args[3];
  if (G.fallback == NULL || !S.ready || !Py_IS_TYPE(out, S.tensor) ||
      SLOT(out, S.toff[T_SHAPE]) == NULL)
    goto python;
  PyObject *have = PyObject_GetAttr(ctx, G.s_spec);
  if (have == NULL) return NULL;
  Py_DECREF(have);
  if (have != spec) {
    PyObject *name = PyObject_GetAttr(spec, G.s_name);
    if (name == NULL) return NULL;
    int bad = PyObject_SetAttr(ctx, G.s_spec, spec) < 0 || PyObject_SetAttr(ctx, G.s_name, name) < 0;
    Py_DECREF(name);
    if (bad) return NULL;
  }
  PyObject *seq = PySequence_Fast(inputs, "record: inputs must be a sequence");
  if (seq == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject *next = PyTuple_New(n), *needs = PyTuple_New(n);
  if (next == NULL || needs == NULL) goto fail;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
    PyObject *e = Py_None, *need = Py_False;
    if (Py_IS_TYPE(t, S.tensor) && SLOT(t, S.toff[T_RG]) != NULL) {
      int rg = PyObject_IsTrue(SLOT(t, S.toff[T_RG]));
      if (rg < 0) goto fail;
      if (rg) {
        if ((e = edge_of(t)) == NULL) goto fail;
        need = Py_True;
        PyTuple_SET_ITEM(next, i, e);
      }
    }
    if (e == Py_None) {
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(next, i, Py_None);
    }
    Py_INCREF(need);
    PyTuple_SET_ITEM(needs, i, need);
  }
  Py_CLEAR(seq);
  if (PyObject_SetAttr(ctx, G.s_next, next) < 0 || PyObject_SetAttr(ctx, G.s_needs, needs) < 0)
    goto fail;
  Py_CLEAR(next);
  Py_CLEAR(needs);
  {
    PyObject *dtype = SLOT(out, S.toff[T_DTYPE]);
    PyObject *m = PyTuple_Pack(3, SLOT(out, S.toff[T_SHAPE]), dtype, SLOT(out, S.toff[T_DEVICE]));
    if (m == NULL) return NULL;
    PyObject *meta = PyTuple_Pack(1, m);
    Py_DECREF(m);
    if (meta == NULL) return NULL;
    int bad = PyObject_SetAttr(ctx, G.s_meta, meta) < 0;
    Py_DECREF(meta);
    if (bad) return NULL;
    PyObject *fl = PyObject_GetAttr(dtype, G.s_float);
    if (fl == NULL) return NULL;
    int is_float = PyObject_IsTrue(fl);
    Py_DECREF(fl);
    if (is_float < 0) return NULL;
    if (is_float) {
      PyObject *nd = PyObject_GetAttr(out, G.s_nondiff);
      if (nd == NULL) return NULL;
      int non_diff = PyObject_IsTrue(nd);
      Py_DECREF(nd);
      if (non_diff < 0) return NULL;
      if (!non_diff) {
        Py_INCREF(Py_True);
        Py_XSETREF(SLOT(out, S.toff[T_RG]), Py_True);
        Py_INCREF(ctx);
        Py_XSETREF(SLOT(out, S.toff[T_NODE]), ctx);
      }
    }
    PyObject *saved = PyObject_GetAttr(ctx, G.s_saved);
    if (saved == NULL) return NULL;
    int any = PyObject_IsTrue(saved);
    Py_DECREF(saved);
    if (any < 0) return NULL;
    if (any) {
      PyObject *outs = PyTuple_Pack(1, out);
      if (outs == NULL) return NULL;
      PyObject *r = PyObject_CallMethodOneArg(ctx, G.s_pack, outs);
      Py_DECREF(outs);
      if (r == NULL) return NULL;
      Py_DECREF(r);
    }
  }
  Py_INCREF(out);
  return out;
fail:
  Py_XDECREF(seq);
  Py_XDECREF(next);
  Py_XDECREF(needs);
  return NULL;
python:
  if (G.fallback == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "record: set_autograd() has not run");
    return NULL;
  }
  return PyObject_Vectorcall(G.fallback, args, nargs, NULL);
}

static PyObject *enabled(PyObject *self, PyObject *unused) { return PyBool_FromLong(S.ready); }

static PyObject *set_enabled(PyObject *self, PyObject *flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return NULL;
  if (on && S.tensor == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "_fastpath.set_enabled: set_up() has not run");
    return NULL;
  }
  int was = S.ready;
  S.ready = on;
  return PyBool_FromLong(was);
}

static PyMethodDef methods[] = {
    {"set_up", set_up, METH_VARARGS, "Hand the module the classes, dtypes and allocators."},
    {"add_kernel", add_kernel, METH_VARARGS, "Register one op's kernels; returns its handle."},
    {"binary", (PyCFunction)(void (*)(void))binary, METH_FASTCALL,
     "binary(a, b, handle): the op's result for the plain case, else None."},
    {"unary", (PyCFunction)(void (*)(void))unary, METH_FASTCALL,
     "unary(x, handle, alpha, beta): the op's result for the plain case, else None."},
    {"empty", (PyCFunction)(void (*)(void))empty, METH_FASTCALL,
     "empty(shape, dtype, device, be): a new contiguous CPU tensor, else None."},
    {"set_autograd", set_autograd, METH_VARARGS,
     "set_autograd(AccumulateGrad, record): hand the module autograd's leaf node class and "
     "its Python record."},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(spec, ctx, inputs, outputs): attach a computed forward to the graph."},
    {"enabled", enabled, METH_NOARGS, "Whether the fast path runs."},
    {"set_enabled", set_enabled, METH_O, "Turn the fast path on or off; returns the old state."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath",
                                    "The fixed cost of plain elementwise op calls, in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastpath(void) { return PyModule_Create(&module); }
