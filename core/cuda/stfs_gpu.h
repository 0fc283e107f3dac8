/* stfs-gpu C ABI: load safetensors tensors and slices into GPU memory.
 *
 * The one header for C, Python (ctypes), Rust and Go callers. Every function
 * returns an stfs_gpu_code (0 = success); on failure the calling thread's
 * stfs_gpu_last_error() holds a one-line message naming the file, tensor and
 * problem. No function throws or aborts on bad input, and none keeps a
 * pointer the caller passed beyond the call.
 *
 * Typical use:
 *   stfs_gpu_source* src;  stfs_gpu_loader* ld;  stfs_gpu_options opt;
 *   stfs_gpu_options_init(&opt);
 *   stfs_gpu_source_open("model.safetensors", &src);
 *   stfs_gpu_loader_create(&opt, &ld);            // STFS_GPU_NO_DEVICE without a GPU
 *   stfs_gpu_source_find(src, "w", 1, &i);
 *   stfs_gpu_load(ld, src, i, ":, 0:512", dev_ptr, capacity, stream, &bytes);
 *
 * Loads are ordered on `stream` (a cudaStream_t; NULL = default stream) and
 * complete when the stream reaches them, unless options.synchronize is set.
 * A loader runs one load at a time; sources are safe to share.
 */
#ifndef STFS_GPU_H_
#define STFS_GPU_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STFS_GPU_ABI_VERSION 1

typedef enum stfs_gpu_code {
  STFS_GPU_OK = 0,
  STFS_GPU_INVALID_ARGUMENT = 1, /* bad slice, bad option, destination too small */
  STFS_GPU_NOT_FOUND = 2,        /* no such file or tensor */
  STFS_GPU_CORRUPTION = 3,       /* the source is not valid safetensors */
  STFS_GPU_IO_ERROR = 4,         /* reading failed, or the file ended early */
  STFS_GPU_STALE = 5,            /* a remote object changed while read */
  STFS_GPU_UNAVAILABLE = 6,      /* transient; may work later */
  STFS_GPU_OUT_OF_RANGE = 7,
  STFS_GPU_NOT_SUPPORTED = 8,    /* e.g. O_DIRECT on tmpfs, URL without HTTP support */
  STFS_GPU_RESOURCE_EXHAUSTED = 9, /* out of device or pinned memory */
  STFS_GPU_INTERNAL = 10,        /* a bug in stfs-gpu */
  STFS_GPU_NO_DEVICE = 11        /* no CUDA driver or device */
} stfs_gpu_code;

typedef struct stfs_gpu_source stfs_gpu_source;
typedef struct stfs_gpu_loader stfs_gpu_loader;

typedef struct stfs_gpu_options {
  uint64_t staging_buffer_bytes;  /* pinned bytes per staging buffer (16 MiB) */
  int32_t staging_buffer_count;   /* staging buffers (8) */
  int32_t reader_threads;         /* 0: automatic */
  uint64_t max_read_gap_bytes;    /* read through holes this small (32 KiB) */
  int32_t direct_io;              /* 1: O_DIRECT reads of local files */
  int32_t synchronize;            /* 1: return only when the bytes are in place */
  int32_t device;                 /* CUDA device the loader is bound to; -1: the current one */
  uint64_t gather_kernel_max_width; /* 0: 2-D copies always via cudaMemcpy2DAsync */
} stfs_gpu_options;

typedef struct stfs_gpu_tensor_info {
  const char* name;      /* not NUL-terminated in general: use name_len */
  size_t name_len;
  const char* dtype;     /* "BF16", NUL-terminated */
  uint32_t ndim;
  const uint64_t* shape; /* ndim entries */
  uint64_t byte_size;
} stfs_gpu_tensor_info;

typedef struct stfs_gpu_request {
  size_t tensor_index;
  const char* slice;     /* numpy index text; NULL or "" = whole tensor */
  void* dst;
  uint64_t capacity;     /* bytes available at dst */
} stfs_gpu_request;

typedef struct stfs_gpu_stats {
  uint64_t fills, reads, bytes_read, copies, copies_2d, bytes_copied;
} stfs_gpu_stats;

/* The calling thread's message for its last failed call ("" if none). */
const char* stfs_gpu_last_error(void);
/* "OK", "INVALID_ARGUMENT", ... for a code. */
const char* stfs_gpu_code_name(int code);
int stfs_gpu_abi_version(void);
/* Usable CUDA devices; 0 without driver or device (last_error says why). */
int stfs_gpu_device_count(void);

void stfs_gpu_options_init(stfs_gpu_options* options);

/* Opens a safetensors file, an http(s)/hf URL (when built with HTTP
 * support) or a tensor directory of an stfs mount. */
int stfs_gpu_source_open(const char* location, stfs_gpu_source** out);
void stfs_gpu_source_close(stfs_gpu_source* source);
int stfs_gpu_source_tensor_count(const stfs_gpu_source* source, size_t* out);
/* Pointers in *out stay valid until the source is closed. */
int stfs_gpu_source_tensor(const stfs_gpu_source* source, size_t index, stfs_gpu_tensor_info* out);
int stfs_gpu_source_find(const stfs_gpu_source* source, const char* name, size_t name_len, size_t* index);
/* The result of a slice: up to max_dims dims in out_shape, the true ndim in
 * *out_ndim, its size in *out_bytes. Any out pointer may be NULL. */
int stfs_gpu_slice_shape(const stfs_gpu_source* source, size_t index, const char* slice,
                         uint64_t* out_shape, uint32_t max_dims, uint32_t* out_ndim, uint64_t* out_bytes);

/* A loader into GPU memory (STFS_GPU_NO_DEVICE without a GPU). options may be NULL. */
int stfs_gpu_loader_create(const stfs_gpu_options* options, stfs_gpu_loader** out);
/* A loader whose destinations are host memory: same pipeline, no GPU needed. */
int stfs_gpu_loader_create_host(const stfs_gpu_options* options, stfs_gpu_loader** out);
void stfs_gpu_loader_destroy(stfs_gpu_loader* loader);

int stfs_gpu_load(stfs_gpu_loader* loader, const stfs_gpu_source* source, size_t index, const char* slice,
                  void* dst, uint64_t capacity, void* stream, uint64_t* out_bytes);
/* Like stfs_gpu_load into memory the loader allocates; free with stfs_gpu_free. */
int stfs_gpu_load_alloc(stfs_gpu_loader* loader, const stfs_gpu_source* source, size_t index,
                        const char* slice, void* stream, void** out_data, uint64_t* out_bytes);
int stfs_gpu_free(stfs_gpu_loader* loader, void* data);
/* Many requests through one pipeline (a rank's share, a whole file). */
int stfs_gpu_load_batch(stfs_gpu_loader* loader, const stfs_gpu_source* source,
                        const stfs_gpu_request* requests, size_t count, void* stream);
int stfs_gpu_last_stats(const stfs_gpu_loader* loader, stfs_gpu_stats* out);
/* Copies destination memory back to the host (verification); blocks. */
int stfs_gpu_copy_to_host(stfs_gpu_loader* loader, const void* src, uint64_t bytes, void* dst);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* STFS_GPU_H_ */
