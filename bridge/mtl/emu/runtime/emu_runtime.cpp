// emu_runtime.cpp: the threadgroup scheduler of msl-emu.
//
// Each worker (one per OS thread that enters msl_emu_work) runs whole
// threadgroups: the threads of a group are fibers on private stacks. A fiber
// runs until it reaches a collective operation (threadgroup_barrier, a simd_*
// function, a simdgroup_matrix operation) or returns; once no fiber can run,
// the scheduler resolves the pending simd operations per simdgroup, then
// releases a barrier that every thread reached, or reports a divergent one.
// Threadgroup memory is a per-worker arena, so groups on different workers
// never share it; the race check keeps per-byte shadow state of which
// threads touched the arena between two barriers.
#if defined(__APPLE__)
#define _XOPEN_SOURCE 600 // ucontext_t with its machine context inline
#define _DARWIN_C_SOURCE 1 // and MAP_ANON, MAP_NORESERVE all the same
#endif
#include "metal_stdlib"

#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if !defined(__x86_64__) || !defined(__linux__) || defined(MSL_EMU_UCONTEXT)
#define MSL_EMU_USE_UCONTEXT 1
#endif
#include <ucontext.h>

#define EXPORT extern "C" __attribute__((visibility("default")))

// Clang lowers float -> bfloat conversions to a call of __truncsfbf2 on
// x86-64 CPUs without AVX512-BF16, and libgcc has it only from GCC 13 on
// (Debian 12 ships GCC 12): each library carries its own, hidden, so the
// call binds here. Round to nearest even; a NaN stays a (quiet) NaN.
extern "C" __attribute__((visibility("hidden"), used)) __bf16 __truncsfbf2(float f) {
  unsigned u;
  __builtin_memcpy(&u, &f, 4);
  unsigned short h;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    h = (unsigned short)((u >> 16) | 0x40u);
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    h = (unsigned short)(u >> 16);
  }
  __bf16 r;
  __builtin_memcpy(&r, &h, 2);
  return r;
}

namespace metal {
namespace __emu {

// A fiber's stack is the top STACK bytes of its SLOT, below them a guard of
// GUARD bytes (metal_stdlib's stack_check).
enum { ABI = 9, MAX_THREADS = 1024, NBUF = 31, SLOT = STACK_SLOT, STACK = STACK_SIZE, GUARD = SLOT - STACK };
enum { ST_READY, ST_SIMD, ST_BAR, ST_DONE };

// FPRange is a range of device memory the dispatch binds and its footprint
// bitmaps (bit i of word i/64 for byte lo+i), filled by Go (lib.go), and
// the bytes the dispatch read and wrote in it, every access counted.
struct FPRange {
  const char *lo, *hi;
  uint64_t *rd, *wr;
  int64_t counted[2];
};

// Desc is one dispatch, filled by Go (bridge/mtl/emu/lib.go keeps the same
// layout) and shared by the workers that run it.
struct Desc {
  int64_t abi;
  int64_t kernel;
  int64_t groups[3];
  int64_t tpg[3];
  int64_t grid[3];
  int64_t flags; // 1: race check, 2: cost witness
  int64_t tgmax;
  Binding buf[NBUF];
  int64_t tgmem[NBUF];
  const FCIn *fcs;
  int64_t nfc;
  int64_t next;
  int64_t errflag;
  int64_t static_tg;
  // finished counts the threadgroups whose every thread returned: a
  // dispatch that finished them all is not failed by a time limit that
  // fired as it ended (lib.go's run).
  int64_t finished;
  // The cost witness, summed over the dispatch's threadgroups: device bytes
  // read and written, device loads and stores by lane, loads by simdgroup
  // (the most any lane of it issued), threadgroup barriers released,
  // simdgroups and threads launched; then the loads of the dispatch's
  // busiest simdgroup (the most any one simdgroup's busiest lane issued).
  int64_t c_rd, c_wr, c_ld, c_st, c_sgld, c_bar, c_sg, c_threads;
  int64_t c_sgld_max;
  // The footprint's bitmaps (flags & 4): nfp disjoint ranges of the bound
  // memory, each with a bit per byte read and per byte written.
  FPRange *fp;
  int64_t nfp;
  char err[1024];
};

struct Shadow {
  uint32_t epoch;
  uint16_t t1, t2; // first thread to touch the byte, first from another simdgroup
};
struct SiteSlot {
  const TGSite *site;
  size_t off, size;
};

struct Worker {
  void *sched_sp;
  Fiber fibers[MAX_THREADS];
  char *stacks;
  uint32_t guarded; // stacks with their guard page (guard_stacks)
  char *arena, *snap;
  Shadow *shadow;
  size_t arena_cap;
  size_t used, dyn_end;
  int64_t dyn_off[NBUF], dyn_len[NBUF];
  SiteSlot sites[64];
  int nsites;
  uint32_t epoch;
  uint32_t returned; // threads of the group that returned from the kernel
  bool cross; // some byte was touched from two simdgroups in this epoch
  const char *efile;
  unsigned eline; // barrier that opened the epoch (null: kernel start)
  Desc *d;
  const KernelEntry *k;
  Group g;
  int64_t c[9]; // this worker's share of Desc's cost witness, same order (c[8]: a most, not a sum)
  int64_t fpc[NBUF][2]; // its share of each FPRange's counted bytes
  int64_t fphint;       // the FPRange of its last access
  alignas(64) char scratch[4096];
  char *big;
  size_t bigcap;
#ifdef MSL_EMU_USE_UCONTEXT
  ucontext_t sched_uc;
  ucontext_t uc[MAX_THREADS];
#endif
};

__thread Fiber *cur __attribute__((tls_model("local-dynamic")));
int race_enabled;
int cost_enabled;
// lanes_reversed (flags & 8) runs each simdgroup's lanes last to first
// between sync points, so a kernel that relies on its lanes in lockstep
// computes otherwise than in the first-to-last order (docs/msl-subset.md,
// "Lanes in lockstep").
static int lanes_reversed;
static int64_t no_stop;
int64_t *volatile stop_word = &no_stop;
int fp_enabled;
static FPRange *fp_ranges;
static int64_t fp_nranges;

void fp_mark(void *wp, const void *p, size_t n, bool write) {
  Worker *wk = (Worker *)wp;
  const char *c = (const char *)p;
  // The range of the worker's last access first: accesses run through one
  // operand at a time. Else the last range starting at or below c (ranges
  // are sorted and disjoint).
  int64_t i = wk->fphint;
  if (i >= fp_nranges || c < fp_ranges[i].lo || c >= fp_ranges[i].hi) {
    int64_t lo = 0, hi = fp_nranges;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (fp_ranges[mid].lo <= c)
        lo = mid + 1;
      else
        hi = mid;
    }
    i = lo - 1;
    if (i < 0 || c >= fp_ranges[i].hi)
      return;
    wk->fphint = i;
  }
  // An access may run from one range into the next (two arguments laid
  // out back to back).
  for (; i < fp_nranges && n > 0; i++) {
    const FPRange &r = fp_ranges[i];
    if (c < r.lo || c >= r.hi)
      return;
    uint64_t *bm = write ? r.wr : r.rd;
    size_t o = size_t(c - r.lo), e = o + n;
    if (e > size_t(r.hi - r.lo))
      e = size_t(r.hi - r.lo);
    wk->fpc[i][write] += int64_t(e - o);
    c += e - o;
    n -= e - o;
    while (o < e) {
      size_t b = o & 63, k = e - o < 64 - b ? e - o : 64 - b;
      uint64_t mask = (k == 64 ? ~uint64_t(0) : (uint64_t(1) << k) - 1) << b;
      uint64_t *w = &bm[o >> 6];
      // Re-reads are the common case: test before the locked OR.
      if ((__atomic_load_n(w, __ATOMIC_RELAXED) & mask) != mask)
        __atomic_fetch_or(w, mask, __ATOMIC_RELAXED);
      o += k;
    }
  }
}
static thread_local Worker *tw;

static const KernelEntry *kernels[8192];
static int nkernels;
static FCSet fcsets[1024];
static int nfcsets;

struct TGRecord {
  const void *kernel;
  int site;
  size_t size, align;
};
static TGRecord tgregs[65536];
static int ntgregs;

int tg_register(const void *kernel, int site, size_t size, size_t align) {
  if (ntgregs < 65536)
    tgregs[ntgregs++] = {kernel, site, size, align < 16 ? 16 : align};
  return 0;
}

Registrar::Registrar(const KernelEntry *k, int n, FCSet fcset) {
  for (int i = 0; i < n && nkernels < 8192; i++)
    kernels[nkernels++] = &k[i];
  if (fcset && nfcsets < 1024)
    fcsets[nfcsets++] = fcset;
}

static Worker *worker() { return cur ? (Worker *)cur->w : tw; }

// ---------------------------------------------------------------------------
// Errors: the first one of a dispatch wins; the thread keeps running on
// dummy memory until its next loop back-edge or scheduling point, where the
// group is abandoned (loop_stop).
// ---------------------------------------------------------------------------

static void vfail(Worker *w, const Fiber *f, const char *fmt, va_list ap) {
  if (!w || !w->d)
    return;
  Desc *d = w->d;
  int64_t z = 0;
  if (!__atomic_compare_exchange_n(&d->errflag, &z, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    return;
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  char where[160] = "";
  const Group &g = w->g;
  if (f)
    snprintf(where, sizeof where, " (thread (%u,%u,%u) of threadgroup (%u,%u,%u))", f->tpitg[0], f->tpitg[1],
             f->tpitg[2], g.tgpig[0], g.tgpig[1], g.tgpig[2]);
  else
    snprintf(where, sizeof where, " (threadgroup (%u,%u,%u))", g.tgpig[0], g.tgpig[1], g.tgpig[2]);
  snprintf(d->err, sizeof d->err, "kernel %s: %s%s", w->k ? w->k->name : "?", msg, where);
}

void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(worker(), cur, fmt, ap);
  va_end(ap);
}

static void fail_group(Worker *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(w, nullptr, fmt, ap);
  va_end(ap);
}

void *dummy(size_t n) {
  alignas(64) static char fallback[1 << 16];
  Worker *w = worker();
  char *p;
  if (!w) {
    p = fallback;
    if (n > sizeof fallback)
      n = sizeof fallback;
  } else if (n <= sizeof w->scratch) {
    p = w->scratch;
  } else {
    if (w->bigcap < n) {
      free(w->big);
      w->big = (char *)malloc(n);
      w->bigcap = n;
    }
    p = w->big;
  }
  memset(p, 0, n);
  return p;
}

static const char *site_name(Worker *w, size_t off, size_t *base) {
  for (int i = 0; i < NBUF; i++)
    if (w->dyn_len[i] > 0 && off >= size_t(w->dyn_off[i]) && off < size_t(w->dyn_off[i] + w->dyn_len[i])) {
      static thread_local char buf[32];
      snprintf(buf, sizeof buf, "threadgroup(%d)", i);
      *base = size_t(w->dyn_off[i]);
      return buf;
    }
  for (int i = 0; i < w->nsites; i++)
    if (off >= w->sites[i].off && off < w->sites[i].off + w->sites[i].size) {
      *base = w->sites[i].off;
      return w->sites[i].site->name;
    }
  *base = 0;
  return "threadgroup memory";
}

// The program-scope constants of the library, noted as it loads (before
// any dispatch, so read without a lock).
struct ConstSpan {
  const char *lo, *hi, *name;
};
static ConstSpan const_spans[4096];
static int n_const_spans;

const_span::const_span(const void *p, size_t n, const char *name) {
  if (n_const_spans < int(sizeof const_spans / sizeof const_spans[0]))
    const_spans[n_const_spans++] = {(const char *)p, (const char *)p + n, name};
}

static const ConstSpan *const_span_at(const char *q, bool end) {
  for (int i = 0; i < n_const_spans; i++)
    if (q >= const_spans[i].lo && (q < const_spans[i].hi || (end && q == const_spans[i].hi)))
      return &const_spans[i];
  return nullptr;
}

void *oob(const void *p, size_t n, const char *lo, const char *hi, int as, int slot) {
  Worker *w = worker();
  long long off = (long long)((const char *)p - lo), len = (long long)(hi - lo);
  if (slot >= 0 && slot < NBUF) {
    const char *name = (w && w->k && w->k->buffer_names[slot]) ? w->k->buffer_names[slot] : "?";
    fail("out-of-bounds access to buffer(%d) '%s': bytes [%lld, %lld) of a %lld-byte binding", slot, name, off,
         off + (long long)n, len);
  } else if (as == 3 || slot == -2) {
    const char *name = "threadgroup memory";
    if (w && lo >= w->arena && lo < w->arena + w->arena_cap) {
      size_t base;
      name = site_name(w, size_t(lo - w->arena), &base);
    }
    fail("out-of-bounds access to '%s': bytes [%lld, %lld) of a %lld-byte threadgroup allocation", name, off,
         off + (long long)n, len);
  } else if (const ConstSpan *c = slot == -4 ? const_span_at(lo, false) : nullptr) {
    fail("out-of-bounds access to program-scope constant '%s': bytes [%lld, %lld) of its %lld bytes", c->name, off,
         off + (long long)n, len);
  } else {
    fail("out-of-bounds access: bytes [%lld, %lld) of a %lld-byte allocation", off, off + (long long)n, len);
  }
  return dummy(n);
}

// misaligned reports a load or store of a type wider than 4 bytes (float4,
// uint4, ...) at an address the GPU would not accept for it.
void *misaligned(const void *p, size_t n, size_t align, const char *lo, int as, int slot) {
  Worker *w = worker();
  long long off = lo ? (long long)((const char *)p - lo) : -1;
  if (slot >= 0 && slot < NBUF) {
    const char *name = (w && w->k && w->k->buffer_names[slot]) ? w->k->buffer_names[slot] : "?";
    fail("misaligned %zu-byte access to buffer(%d) '%s' at byte %lld: its type needs %zu-byte alignment", n, slot, name,
         off, align);
  } else {
    fail("misaligned %zu-byte access at byte %lld (address space %d): its type needs %zu-byte alignment", n, off, as,
         align);
  }
  return dummy(n);
}

void *null_deref(size_t n, int as, int slot) {
  Worker *w = worker();
  if (slot >= 0 && slot < NBUF) {
    const char *name = (w && w->k && w->k->buffer_names[slot]) ? w->k->buffer_names[slot] : "?";
    fail("access through a null pointer: buffer(%d) '%s' is not bound", slot, name);
  } else {
    fail("access through a null %s pointer", as == 3 ? "threadgroup" : "device");
  }
  return dummy(n);
}

// on_stack: an address in a fiber's stack, a thread variable's.
static bool on_stack(const Worker *w, const char *q) {
  return q >= w->stacks && q < w->stacks + size_t(MAX_THREADS) * SLOT;
}

void atomic_at(const void *p, bool fadd, const char *file, unsigned line) {
  Worker *w = worker();
  if (!w || !w->d)
    return;
  const char *q = (const char *)p;
  if (on_stack(w, q))
    fail("%s:%u: an atomic operation on thread memory (Metal's atomic functions take device or threadgroup atomics)",
         file, line);
  else if (fadd && q >= w->arena && q < w->arena + w->arena_cap)
    fail("%s:%u: atomic_fetch_add/sub_explicit on a threadgroup atomic_float (Metal adds to an atomic_float only in "
         "device memory)", file, line);
}

void recover(const void *p, int as, const char **lo, const char **hi, int *slot, const char *file, unsigned line) {
  Worker *w = worker();
  if (!w || !w->d)
    return;
  static const char *const space[] = {"thread", "device", "constant", "threadgroup"};
  const char *q = (const char *)p;
  // Metal converts no pointer between address spaces (MSL specification,
  // "Address Spaces"): a thread variable's address (on a fiber's stack) or
  // threadgroup memory's held as a device pointer does not build on a Mac.
  // Constant pointers are left out: a function's `constant` arrays live on
  // its stack here (docs/msl-subset.md).
  const char *from = nullptr;
  if ((as == 1 || as == 3) && on_stack(w, q))
    from = "thread";
  else if ((as == 1 || as == 2) && q >= w->arena && q < w->arena + w->arena_cap)
    from = "threadgroup";
  if (from) {
    fail("%s:%u: the address of %s memory converted to a %s pointer (Metal converts no pointer between address "
         "spaces)", file, line, from, space[as]);
    return;
  }
  if (as == 3 || as == 0) {
    if (q >= w->arena && q <= w->arena + w->used) {
      *lo = w->arena;
      *hi = w->arena + w->used;
      *slot = -2;
      return;
    }
  }
  if (as == 3) {
    for (int i = 0; i < NBUF; i++) {
      const Binding &b = w->d->buf[i];
      if (b.ptr && q >= b.ptr && q < b.ptr + b.len) {
        fail("%s:%u: the address of device memory converted to a threadgroup pointer (Metal converts no pointer "
             "between address spaces)", file, line);
        return;
      }
    }
  } else {
    // A binding that holds the address comes first: the one-past-the-end
    // address of another (an end pointer) is also the first byte of a
    // buffer allocated right after it, and that buffer's pointers are its.
    for (int pass = 0; pass < 2; pass++) {
      for (int i = 0; i < NBUF; i++) {
        const Binding &b = w->d->buf[i];
        if (b.ptr && q >= b.ptr && (q < b.ptr + b.len || (pass == 1 && q == b.ptr + b.len))) {
          *lo = b.ptr;
          *hi = b.ptr + b.len;
          *slot = i;
          return;
        }
      }
    }
    // No binding holds it. A device pointer then points at memory no
    // kernel owns, mapped or not (a pointer moved past its buffer, or made
    // from an integer); a constant one may also hold a program-scope
    // constant's address (library data) or a function's constant array's
    // (its stack, above), and is wild only outside them. Its accesses go
    // to the empty range at the address, which oob answers with the
    // stand-in, so that nothing reads or writes through it.
    if (as == 2) {
      for (int pass = 0; pass < 2; pass++) {
        if (const ConstSpan *c = const_span_at(q, pass == 1)) {
          *lo = c->lo;
          *hi = c->hi;
          *slot = -4;
          return;
        }
      }
    }
    Dl_info info;
    if (as == 1 || (as == 2 && !on_stack(w, q) && !dladdr(p, &info))) {
      fail("%s:%u: a %s pointer to %p, which lies in no bound buffer%s (a pointer moved past its buffer, or made "
           "from an integer)", file, line, space[as], p, as == 2 ? " or program data" : "");
      *lo = q;
      *hi = q;
      *slot = -3;
    }
  }
}

// thread_at is thread_check's slow path: an address off the running fiber's
// stack that lies in threadgroup memory or a bound buffer fails the command
// buffer; any other (a program-scope constant's, the worker's own stack)
// passes.
[[noreturn]] static void abandon();

void thread_at(const void *p, const char *file, unsigned line) {
  Worker *w = worker();
  if (!w || !w->d)
    return;
  const char *q = (const char *)p;
  if (on_stack(w, q))
    return;
  if (q >= w->arena && q < w->arena + w->arena_cap) {
    fail("%s:%u: the address of threadgroup memory converted to a thread pointer (Metal converts no pointer between "
         "address spaces)", file, line);
    return;
  }
  for (int i = 0; i < NBUF; i++) {
    const Binding &b = w->d->buf[i];
    if (b.ptr && q >= b.ptr && q < b.ptr + b.len) {
      const char *name = (w->k && w->k->buffer_names[i]) ? w->k->buffer_names[i] : "?";
      fail("%s:%u: the address of device memory (buffer(%d) '%s') converted to a thread pointer (Metal converts no "
           "pointer between address spaces)", file, line, i, name);
      return;
    }
  }
  // What else a thread pointer may hold lies in a loaded library: a
  // program-scope constant, the stand-in an out-of-range read returns
  // (dummy). An address outside them all is wild, and reading through it
  // would fault and end the process, or read another's memory.
  Dl_info info;
  if (!dladdr(p, &info)) {
    fail("%s:%u: a thread pointer to %p, which lies in no thread's stack, threadgroup memory, bound buffer or "
         "program data (a pointer moved past its variable, or made from an integer)",
         file, line, p);
    if (cur)
      abandon(); // the thread would go on to read through it
  }
}

int ref_space_at(const void *p) {
  Worker *w = worker();
  if (!w || !w->d)
    return 0;
  const char *q = (const char *)p;
  if (on_stack(w, q))
    return 0;
  if (q >= w->arena && q < w->arena + w->arena_cap)
    return 3;
  for (int i = 0; i < NBUF; i++) {
    const Binding &b = w->d->buf[i];
    if (b.ptr && q >= b.ptr && q < b.ptr + b.len)
      return w->k && w->k->buffer_spaces[i] == '2' ? 2 : 1;
  }
  Dl_info info;
  if (const_span_at(q, false) || dladdr(p, &info))
    return 2;
  return 0;
}

void no_space_overload(const char *fn, const char *file, unsigned line, const int *s, int n, const char *declared) {
  static const char *const kind[] = {"thread", "device", "constant", "threadgroup"};
  char got[160] = "";
  size_t m = 0;
  for (int i = 0; i < n && m < sizeof got; i++)
    m += snprintf(got + m, sizeof got - m, "%s%s", i ? ", " : "", kind[s[i] & 3]);
  fail("%s:%u: no overload of %s takes references to (%s) memory; its overloads take %s (Metal picks the overload "
       "for the argument's address space)", file, line, fn, got, declared);
}

void this_space_at(const void *self, int mask, const char *fn) {
  Worker *w = worker();
  if (!w || !w->d)
    return;
  const char *q = (const char *)self;
  const char *where = nullptr;
  if (q >= w->arena && q < w->arena + w->used) {
    if (!(mask & 8))
      where = "threadgroup";
  } else {
    bool bound = false;
    for (int i = 0; i < NBUF && !bound; i++) {
      const Binding &b = w->d->buf[i];
      bound = b.ptr && q >= b.ptr && q < b.ptr + b.len;
    }
    if (bound && !(mask & 6))
      where = "device";
    else if (!bound && !(mask & 5))
      where = "thread";
  }
  if (where)
    fail("%s called on an object in %s memory: its `this` is not declared for that address space (MSL needs an "
         "overload qualified `%s`)", fn, where, where);
}

// ---------------------------------------------------------------------------
// Threadgroup memory
// ---------------------------------------------------------------------------

static const unsigned char UNINIT = 0xff; // NaN as float/half: reads before writes show up

void *tg_static(const TGSite *site, size_t size, size_t align) {
  Worker *w = worker();
  for (int i = 0; i < w->nsites; i++)
    if (w->sites[i].site == site)
      return w->arena + w->sites[i].off;
  size_t off = (w->used + align - 1) / align * align;
  if (off + size > w->arena_cap || w->nsites == 64) {
    fail("threadgroup variable '%s' (%zu bytes) does not fit the emulator's threadgroup arena", site->name, size);
    return dummy(size);
  }
  w->used = off + size;
  if (int64_t(w->used) > w->d->tgmax)
    fail("threadgroup memory of %zu bytes (at '%s') exceeds the device limit of %lld bytes", w->used, site->name,
         (long long)w->d->tgmax);
  memset(w->arena + off, UNINIT, size);
  memset(w->snap + off, UNINIT, size);
  w->sites[w->nsites++] = {site, off, size};
  return w->arena + off;
}

void *tg_dynamic(int idx, int64_t *len) {
  Worker *w = worker();
  if (idx < 0 || idx >= NBUF || w->dyn_len[idx] <= 0) {
    fail("threadgroup(%d) has no memory: call SetThreadgroupMemoryLength", idx);
    *len = 0;
    return nullptr;
  }
  *len = w->dyn_len[idx];
  return w->arena + w->dyn_off[idx];
}

void tg_track(const void *p, size_t n) {
  Fiber *f = cur;
  if (!f)
    return;
  Worker *w = (Worker *)f->w;
  const char *q = (const char *)p;
  if (q < w->arena || q + n > w->arena + w->used)
    return;
  size_t off = size_t(q - w->arena);
  uint16_t me = uint16_t(f->lid);
  for (size_t i = off; i < off + n; i++) {
    Shadow &s = w->shadow[i];
    if (s.epoch != w->epoch) {
      s.epoch = w->epoch;
      s.t1 = me;
      s.t2 = 0xffff;
    } else if (s.t2 == 0xffff && s.t1 != me && (s.t1 >> 5) != (me >> 5)) {
      s.t2 = me;
      w->cross = true;
    }
  }
}

// A byte that threads of two simdgroups touched between the same two
// barriers, and whose value changed in between, is a data race: one of them
// wrote it while the other read or wrote it. Lanes of one simdgroup run in
// lockstep on Apple GPUs, so they are not compared.
static void race_check(Worker *w, const char *efile, unsigned eline) {
  if (!race_enabled || !w->cross)
    return;
  for (size_t i = 0; i < w->used; i++) {
    const Shadow &s = w->shadow[i];
    if (s.epoch != w->epoch || s.t2 == 0xffff || w->arena[i] == w->snap[i])
      continue;
    size_t base;
    const char *name = site_name(w, i, &base);
    char from[256], to[256];
    if (w->efile)
      snprintf(from, sizeof from, "the barrier at %s:%u", w->efile, w->eline);
    else
      snprintf(from, sizeof from, "the kernel's start");
    if (efile)
      snprintf(to, sizeof to, "the barrier at %s:%u", efile, eline);
    else
      snprintf(to, sizeof to, "the kernel's end");
    fail_group(w,
               "threadgroup memory race on '%s' (byte %zu): threads %u (simdgroup %u) and %u (simdgroup %u) "
               "accessed it between %s and %s and one of them wrote it (missing threadgroup_barrier?)",
               name, i - base, s.t1, s.t1 >> 5, s.t2, s.t2 >> 5, from, to);
    return;
  }
}

static void new_epoch(Worker *w, const char *file, unsigned line) {
  w->epoch++;
  w->cross = false;
  w->efile = file;
  w->eline = line;
  if (race_enabled)
    memcpy(w->snap, w->arena, w->used);
}

// ---------------------------------------------------------------------------
// Fibers
// ---------------------------------------------------------------------------

#ifndef MSL_EMU_USE_UCONTEXT
extern "C" void msl_emu_switch(void **from, void *to);
// Saves the callee-saved registers on the current stack, stores the stack
// pointer in *from, and resumes the stack `to` (System V x86-64).
asm(R"(
.text
.p2align 4
.globl msl_emu_switch
.hidden msl_emu_switch
.type msl_emu_switch,@function
msl_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size msl_emu_switch, .-msl_emu_switch
)");
#endif

static void fiber_main() {
  Fiber *f = cur;
  Worker *w = (Worker *)f->w;
  f->top = __builtin_frame_address(0);
  w->k->body(f);
  f->state = ST_DONE;
  w->returned++;
#ifdef MSL_EMU_USE_UCONTEXT
  swapcontext((ucontext_t *)f->uctx, &w->sched_uc);
#else
  msl_emu_switch(&f->sp, w->sched_sp);
#endif
  __builtin_trap();
}

static inline void to_sched(Fiber *f) {
  Worker *w = (Worker *)f->w;
#ifdef MSL_EMU_USE_UCONTEXT
  swapcontext((ucontext_t *)f->uctx, &w->sched_uc);
#else
  msl_emu_switch(&f->sp, w->sched_sp);
#endif
}

static inline char *stack_base(Worker *w, const Fiber *f) {
  return w->stacks + size_t(f->lid) * SLOT + GUARD;
}

static inline void run(Worker *w, Fiber *f) {
  cur = f;
#ifdef MSL_EMU_USE_UCONTEXT
  swapcontext(&w->sched_uc, (ucontext_t *)f->uctx);
#else
  msl_emu_switch(&w->sched_sp, f->sp);
#endif
  cur = nullptr;
}

static void init_fiber(Worker *w, Fiber *f, int i) {
  char *base = stack_base(w, f);
#ifdef MSL_EMU_USE_UCONTEXT
  ucontext_t *uc = &w->uc[i];
  getcontext(uc);
  uc->uc_stack.ss_sp = base;
  uc->uc_stack.ss_size = STACK;
  uc->uc_link = nullptr;
  makecontext(uc, fiber_main, 0);
  f->uctx = uc;
#else
  void **sp = (void **)(base + STACK);
  *--sp = nullptr;             // the return address fiber_main never uses; keeps the ABI alignment
  *--sp = (void *)&fiber_main; // msl_emu_switch's ret lands here
  for (int r = 0; r < 6; r++)
    *--sp = nullptr;
  f->sp = sp;
#endif
}

// call_path hashes the return addresses of the frames between block_simd
// and the fiber's first (top): the simd operation's call instruction and
// the chain of calls that reached it. A function that both sides of a
// branch call runs one operation per call site, inlined or not, as a GPU
// runs each side with its own lanes; lanes that call it together share the
// path (docs/msl-subset.md, "Synchronisation and SIMD groups"). Every frame
// keeps its frame pointer and no kernel call is a jump (compile.go's
// compileFlags and unitFlags).
static inline uint64_t call_path(const Fiber *f, void **fp) {
  const char *lo = stack_base((Worker *)f->w, f), *hi = lo + STACK;
  uint64_t h = 0;
  while ((const char *)fp >= lo && (const char *)fp < hi && fp != f->top) {
    h = (h ^ uint64_t(uintptr_t(fp[1]))) * 0x9e3779b97f4a7c15ull;
    void **up = (void **)fp[0];
    if (up <= fp)
      break;
    fp = up;
  }
  return h;
}

// loop_rounds adds to h the round of every loop the fiber is in (the
// shim's LoopScope), so that lanes meet only in the same round of each.
static inline uint64_t loop_rounds(const Fiber *f, uint64_t h) {
  for (const Scope *s = f->scopes; s; s = s->up)
    if (!s->ret)
      h = (h ^ (uint64_t(s->id) << 32 | s->n)) * 0x9e3779b97f4a7c15ull;
  return h;
}

void block_simd() {
  Fiber *f = cur;
  f->op.path = loop_rounds(f, call_path(f, (void **)__builtin_frame_address(0)));
  f->state = ST_SIMD;
  to_sched(f);
}

void block_barrier(const char *file, unsigned line) {
  Fiber *f = cur;
  f->state = ST_BAR;
  f->bfile = file;
  f->bline = line;
  to_sched(f);
}

// stop_thread ends the running thread of a failed dispatch at a loop's
// back-edge or a function's entry: its fiber goes back to the scheduler for
// good, and run_group abandons the group. Errflag 2 is the time limit Go
// set (lib.go); the first thread to see it says where it was in err (`in
// the loop at k.metal:4 (thread ...)`), which Go's message quotes. Outside a
// fiber (a constant's initialiser) the thread goes on.
static void stop_thread(const char *fn, const char *file, unsigned line) {
  Fiber *f = cur;
  if (!f)
    return;
  Worker *w = (Worker *)f->w;
  Desc *d = w->d;
  int64_t two = 2;
  if (d && __atomic_compare_exchange_n(&d->errflag, &two, 3, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    const Group &g = w->g;
    char what[160] = "the loop";
    if (fn)
      snprintf(what, sizeof what, "a call of %s", fn);
    snprintf(d->err, sizeof d->err, "in %s at %s:%u (thread (%u,%u,%u) of threadgroup (%u,%u,%u))", what, file, line,
             f->tpitg[0], f->tpitg[1], f->tpitg[2], g.tgpig[0], g.tgpig[1], g.tgpig[2]);
  }
  f->state = ST_DONE;
  to_sched(f);
  __builtin_trap(); // run_group never resumes it
}

void loop_stop(const char *file, unsigned line) { stop_thread(nullptr, file, line); }
void loop_halt(const char *file, unsigned line) {
  stop_thread(nullptr, file, line);
  __builtin_unreachable(); // a fiber's thread (LoopScope::tick) never comes back
}

// note_waiting_stop says where a group's threads wait when the time limit
// finds every one of them at a barrier or a simdgroup operation, so none
// passes a loop's back-edge to say it (stop_thread): an endless loop around
// a barrier is then named by the barrier's line, whichever the scheduler
// or a thread saw first.
static void note_waiting_stop(Worker *w, uint32_t n) {
  Desc *d = w->d;
  for (uint32_t i = 0; i < n; i++) {
    const Fiber *f = &w->fibers[i];
    const char *what, *file;
    unsigned line;
    if (f->state == ST_BAR) {
      what = "a threadgroup barrier", file = f->bfile, line = f->bline;
    } else if (f->state == ST_SIMD) {
      what = "a simdgroup operation", file = f->op.file, line = f->op.line;
    } else {
      continue;
    }
    int64_t two = 2;
    if (file && __atomic_compare_exchange_n(&d->errflag, &two, 3, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      const Group &g = w->g;
      snprintf(d->err, sizeof d->err, "waiting at %s at %s:%u (thread (%u,%u,%u) of threadgroup (%u,%u,%u))", what,
               file, line, f->tpitg[0], f->tpitg[1], f->tpitg[2], g.tgpig[0], g.tgpig[1], g.tgpig[2]);
    }
    return;
  }
}

void call_stop(const char *fn, const char *file, unsigned line) { stop_thread(fn, file, line); }

// stack_out fails the dispatch of a thread whose stack ran out on entering
// function fn, and abandons the thread as stop_thread does.
[[noreturn]] static void stack_out(const char *fn, const char *file, unsigned line) {
  Fiber *f = cur;
  fail("stack overflow in %s at %s:%u: the thread's %d KiB of stack ran out (msl-emu's limit: endless or too deep "
       "recursion, or local arrays too large)",
       fn, file, line, int(STACK - STACK_MARGIN) >> 10);
  f->state = ST_DONE;
  to_sched(f);
  __builtin_trap(); // run_group never resumes it
}

// clang's checks of integer division by zero and of array indices, which
// the library is built with (compile.go), call these handlers instead of
// running the operation: a division by zero traps on the CPU (SIGFPE) and a
// thread array read or written far past its end faults, either ending the
// process, where a GPU does neither. Each fails the dispatch at the line and
// abandons the thread, as stack_out does. Their data start with clang's
// source location; an array's go on with its type's and its index type's
// descriptors (kind, info: log2(bits) << 1 | signed, name).
struct SrcLoc {
  const char *file;
  uint32_t line, col;
};
struct TypeDesc {
  uint16_t kind, info;
  char name[1];
};
struct OOBData {
  SrcLoc loc;
  const TypeDesc *array, *index;
};

// abandon ends the running thread of a failed dispatch, as stop_thread
// does, where going on would fault.
[[noreturn]] static void abandon() {
  Fiber *f = cur;
  f->state = ST_DONE;
  to_sched(f);
  __builtin_trap(); // run_group never resumes it
}

[[noreturn]] static void check_out(const SrcLoc *loc, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Fiber *f = cur;
  if (!f) { // a constant's initialiser, outside any thread
    fprintf(stderr, "msl-emu: %s at %s:%u\n", msg, loc->file, loc->line);
    abort();
  }
  fail("%s at %s:%u", msg, loc->file, loc->line);
  f->state = ST_DONE;
  to_sched(f);
  __builtin_trap(); // run_group never resumes it
}

extern "C" [[noreturn]] void __ubsan_handle_divrem_overflow_abort(void *data, void *, void *) {
  check_out((const SrcLoc *)data, "integer division by zero");
}

// div_fail is the shim's check of integer division (metal_stdlib's
// div_check), which clang makes for no vector and for no quotient that
// overflows (INT_MIN / -1), both of which trap on the CPU.
void div_fail(bool rem, bool zero, int lane, long long a, const char *file, unsigned line) {
  const SrcLoc loc = {file, line, 0};
  char in[24] = "";
  if (lane >= 0)
    snprintf(in, sizeof in, " in lane %d", lane);
  if (zero)
    check_out(&loc, "integer division by zero%s", in);
  check_out(&loc, "integer division overflow%s: %lld %c -1", in, a, rem ? '%' : '/');
}

struct AlignData {
  SrcLoc loc;
  const TypeDesc *type;
  unsigned char log_align, kind;
};

// Device and threadgroup pointers check their own alignment (ptr); this
// catches a thread pointer's, whose misaligned vector access faults on the
// CPU.
extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(void *data, void *p) {
  const AlignData *d = (const AlignData *)data;
  check_out(&d->loc, "misaligned access to thread memory at %p: %s needs %u-byte alignment", p, d->type->name,
            1u << d->log_align);
}

extern "C" [[noreturn]] void __ubsan_handle_out_of_bounds_abort(void *data, void *index) {
  const OOBData *d = (const OOBData *)data;
  const unsigned bits = 1u << (d->index->info >> 1);
  long long i = (long long)(uintptr_t)index;
  if (d->index->info & 1 && bits < 64)
    i = (long long)((uint64_t)i << (64 - bits)) >> (64 - bits);
  else if (bits < 64)
    i &= (1ll << bits) - 1;
  check_out(&d->loc, "thread array index %lld out of range of %s", i, d->array->name);
}

// stack_slow is stack_check's way out: in a fiber, its stack pointer has
// passed STACK_FLOOR. stack_out runs on the top of the thread's stack, which
// the abandoned thread no longer needs, rather than below the floor.
void stack_slow(const char *fn, const char *file, unsigned line) {
  Fiber *f = cur;
  if (!f)
    return; // an OS thread's stack, whose address says nothing
  char *top = stack_base((Worker *)f->w, f) + STACK;
  void (*out)(const char *, const char *, unsigned) = stack_out;
#if defined(__x86_64__)
  asm volatile("movq %0, %%rsp\n\tcallq *%1" : : "r"(top), "r"(out), "D"(fn), "S"(file), "d"(line) : "memory");
#elif defined(__aarch64__)
  register const char *x0 asm("x0") = fn;
  register const char *x1 asm("x1") = file;
  register unsigned long x2 asm("x2") = line;
  asm volatile("mov sp, %0\n\tblr %1" : : "r"(top), "r"(out), "r"(x0), "r"(x1), "r"(x2) : "memory", "x30");
#else
  (void)top;
  out(fn, file, line);
#endif
  __builtin_unreachable();
}

static bool same_site(const char *f1, unsigned l1, unsigned c1, const char *f2, unsigned l2, unsigned c2) {
  return l1 == l2 && c1 == c2 && (f1 == f2 || strcmp(f1, f2) == 0);
}

// Place is one step of where a lane stopped at a simd operation stands,
// from the kernel's frame in: a frame (the call that made it), a loop (its
// start and round), and last the operation.
struct Place {
  const char *file; // null: not known
  uint32_t line, col, id, n;
  const void *ret;  // a frame's return address
  bool loop;
};

// places lists where f stands, outermost first, in p (room for kMaxPlaces);
// -1 if that does not hold it.
enum { kMaxPlaces = 64 };
static int places(const Fiber *f, Place *p) {
  int n = 0;
  for (const Scope *s = f->scopes; s; s = s->up) {
    if (n == kMaxPlaces - 1)
      return -1;
    p[n++] = {s->file, s->line, s->col, s->id, s->n, s->ret, !s->ret};
  }
  for (int i = 0, j = n - 1; i < j; i++, j--) {
    Place t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  p[n++] = {f->op.file, f->op.line, f->op.col, 0, 0, nullptr, false};
  return n;
}

// before reports whether x comes before y in the source of one function:
// a loop's start before an operation or call after it, one round of a loop
// before the next. Places in two files, or with one not known, are in no
// order.
static bool before(const Place &x, const Place &y) {
  if (!x.file || !y.file || (x.file != y.file && strcmp(x.file, y.file) != 0))
    return false;
  if (x.line != y.line || x.col != y.col)
    return x.line < y.line || (x.line == y.line && x.col < y.col);
  return x.loop && y.loop && x.id == y.id && x.n < y.n;
}

// same_place reports whether x and y are one place: one call's frame, one
// round of one loop, or one operation's site.
static bool same_place(const Place &x, const Place &y) {
  return x.loop == y.loop && x.ret == y.ret && x.id == y.id && x.n == y.n && x.line == y.line && x.col == y.col &&
         (x.file == y.file || (x.file && y.file && strcmp(x.file, y.file) == 0));
}

// waits reports whether fiber a, stopped at a simd operation, waits for b,
// stopped at another: b is earlier in a GPU's program order, which runs
// the code in its order and a loop round by round. At the first place
// where they part (a frame, a loop or the operation), b is in an earlier
// round of a loop both are in (a lane of round 0 may yet reach round 1's
// operation), or stands before a in the source of that function: in a
// loop or a call that a has left, at an operation before the loop or call
// a is in, or on the side of a branch that comes first, whose lanes
// complete their operations before the other side's. A lane before a runs
// on to a's place, or past it. This orders the stopped lanes strictly
// (each place before the next), so some operation always completes; lanes
// at places in no order (a call the rewriter notes no place of) complete
// apart. A lane more than kMaxPlaces deep orders none (docs/msl-subset.md,
// "Synchronisation and SIMD groups").
static bool waits(const Fiber *a, const Fiber *b) {
  Place pa[kMaxPlaces], pb[kMaxPlaces];
  int na = places(a, pa), nb = places(b, pb);
  if (na < 0 || nb < 0)
    return false;
  for (int k = 0; k < na && k < nb; k++)
    if (!same_place(pa[k], pb[k]))
      return before(pb[k], pa[k]);
  return false;
}

// resolve_simd completes the pending simd operations of every simdgroup
// whose lanes have all stopped; lanes waiting at the same call site along
// the same path (call_path) in the same rounds of their loops (loop_rounds)
// form one operation. An operation waits while its lanes wait for another
// stopped lane (waits), which may yet join it: that lane's operation
// completes first, and the lane runs on. It reports whether any lane
// became runnable.
static bool resolve_simd(Worker *w) {
  bool any = false;
  uint32_t n = w->g.n;
  for (uint32_t base = 0; base < n; base += 32) {
    uint32_t end = base + 32 < n ? base + 32 : n;
    uint32_t waiting = 0; // the lanes stopped at a simd operation as the pass began
    for (uint32_t i = base; i < end; i++)
      if (w->fibers[i].state == ST_SIMD)
        waiting |= 1u << (i - base);
    SimdOp *ops[32][32];
    int nops = 0;
    for (uint32_t seen = 0; waiting & ~seen;) {
      Fiber *lead = &w->fibers[base + __builtin_ctz(waiting & ~seen)];
      SimdOp **op = ops[nops];
      memset(op, 0, sizeof ops[0]); // lanes past a partial simdgroup too
      uint32_t mine = 0;
      for (uint32_t i = base; i < end; i++) {
        Fiber *f = &w->fibers[i];
        if (f->state == ST_SIMD && f->op.path == lead->op.path &&
            same_site(f->op.file, f->op.line, f->op.col, lead->op.file, lead->op.line, lead->op.col)) {
          if (f->op.resolve != lead->op.resolve) {
            fail_group(w, "simd operations of different types at %s:%u", lead->op.file, lead->op.line);
          }
          op[i - base] = &f->op;
          mine |= 1u << (i - base);
        }
      }
      seen |= mine;
      bool wait = false;
      for (uint32_t rest = waiting & ~mine; rest && !wait; rest &= rest - 1)
        wait = waits(lead, &w->fibers[base + __builtin_ctz(rest)]);
      // waits orders the lanes strictly, so some operation waits for none;
      // should two lanes of one operation stand at places it tells apart,
      // the last one completes all the same.
      if (!wait || (nops == 0 && !(waiting & ~seen)))
        nops++;
    }
    for (int k = 0; k < nops; k++) {
      SimdOp **op = ops[k];
      for (int l = 0; l < 32; l++)
        if (op[l]) {
          op[l]->resolve(op);
          break;
        }
      for (int l = 0; l < 32; l++)
        if (op[l])
          op[l]->self->state = ST_READY;
      any = true;
    }
  }
  return any;
}

// sum_cost adds a finished threadgroup's per-thread counts to the worker's.
static void sum_cost(Worker *w) {
  uint32_t n = w->g.n;
  uint64_t maxld = 0;
  for (uint32_t i = 0; i < n; i++) {
    Fiber *f = &w->fibers[i];
    fp_flush(f); // the thread's last access was a load
    w->c[0] += int64_t(f->c_rd);
    w->c[1] += int64_t(f->c_wr);
    w->c[2] += int64_t(f->c_ld);
    w->c[3] += int64_t(f->c_st);
    if (f->c_ld > maxld)
      maxld = f->c_ld;
    if ((i & 31) == 31 || i == n - 1) {
      w->c[4] += int64_t(maxld);
      if (int64_t(maxld) > w->c[8])
        w->c[8] = int64_t(maxld);
      maxld = 0;
    }
  }
  w->c[6] += w->g.nsg;
  w->c[7] += n;
}

// guard_stacks puts the guard below each of the first n fiber stacks not
// yet guarded: a frame that overruns stack_check's margin then faults at
// the fiber instead of corrupting its neighbour. Each guard splits the stacks'
// mapping in two, and every library has a worker per OS thread, so only
// the stacks a group uses get one: guarding all 1024 up front took 2048
// of the process's 65530 mappings (vm.max_map_count) a worker.
static void guard_stacks(Worker *w, uint32_t n) {
  for (; w->guarded < n; w->guarded++)
    mprotect(w->stacks + size_t(w->guarded) * SLOT, GUARD, PROT_NONE);
}

static bool run_group(Worker *w, uint32_t gx, uint32_t gy, uint32_t gz) {
  Desc *d = w->d;
  Group &g = w->g;
  uint32_t gp[3] = {gx, gy, gz};
  g.n = 1;
  for (int i = 0; i < 3; i++) {
    g.tgpig[i] = gp[i];
    g.tpg_req[i] = uint32_t(d->tpg[i]);
    g.ntg[i] = uint32_t(d->groups[i]);
    g.grid[i] = uint32_t(d->grid[i]);
    uint32_t start = gp[i] * g.tpg_req[i];
    uint32_t left = g.grid[i] - start;
    g.tpg[i] = left < g.tpg_req[i] ? left : g.tpg_req[i];
    g.n *= g.tpg[i];
  }
  g.nsg = (g.n + 31) / 32;
  g.bufs = d->buf;
  uint32_t n = g.n;

  // Threadgroup memory: the dynamic [[threadgroup(i)]] lengths first, then the
  // kernel's threadgroup variables as they are declared.
  size_t off = 0;
  for (int i = 0; i < NBUF; i++) {
    w->dyn_len[i] = d->tgmem[i];
    if (d->tgmem[i] > 0) {
      off = (off + 15) & ~size_t(15);
      w->dyn_off[i] = int64_t(off);
      off += size_t(d->tgmem[i]);
    }
  }
  if (off > w->arena_cap) {
    fail_group(w, "%zu bytes of dynamic threadgroup memory exceed the emulator's arena", off);
    return false;
  }
  w->nsites = 0;
  w->returned = 0;
  w->used = w->dyn_end = off;
  memset(w->arena, UNINIT, off);
  new_epoch(w, nullptr, 0);

  guard_stacks(w, n);
  for (uint32_t i = 0; i < n; i++) {
    Fiber *f = &w->fibers[i];
    f->state = ST_READY;
    f->lid = i;
    f->lane = i & 31;
    f->sg = i >> 5;
    f->tpitg[0] = i % g.tpg[0];
    f->tpitg[1] = (i / g.tpg[0]) % g.tpg[1];
    f->tpitg[2] = i / (g.tpg[0] * g.tpg[1]);
    f->g = &g;
    f->w = w;
    f->c_rd = f->c_wr = f->c_ld = f->c_st = 0;
    f->last_n = 0;
    f->scopes = nullptr; // a thread of a failed dispatch left its loops and frames unclosed
    f->ncalls = 0;
    init_fiber(w, f, int(i));
  }

  for (;;) {
    for (uint32_t k = 0; k < n; k++) {
      uint32_t i = k;
      if (lanes_reversed) { // lane k of its simdgroup runs as the one as far from its last
        const uint32_t base = k & ~31u, width = n - base < 32 ? n - base : 32;
        i = base + width - 1 - (k - base);
      }
      if (w->fibers[i].state == ST_READY)
        run(w, &w->fibers[i]);
    }
    // A failed dispatch ends here, its threads stopped wherever they are
    // (loop_stop); the next group starts each fiber afresh. A group whose
    // threads all returned has finished, whatever failed meanwhile.
    if (w->returned != n && __atomic_load_n(&d->errflag, __ATOMIC_RELAXED)) {
      note_waiting_stop(w, n);
      return false;
    }
    if (resolve_simd(w))
      continue;
    uint32_t done = 0, bar = 0;
    const Fiber *b0 = nullptr;
    bool one_site = true;
    for (uint32_t i = 0; i < n; i++) {
      const Fiber *f = &w->fibers[i];
      if (f->state == ST_DONE) {
        done++;
      } else if (f->state == ST_BAR) {
        bar++;
        if (!b0)
          b0 = f;
        else if (!same_site(f->bfile, f->bline, 0, b0->bfile, b0->bline, 0))
          one_site = false;
      }
    }
    if (done == n) {
      race_check(w, nullptr, 0);
      break;
    }
    if (bar == n && one_site) {
      w->c[5]++;
      race_check(w, b0->bfile, b0->bline);
      new_epoch(w, b0->bfile, b0->bline);
      for (uint32_t i = 0; i < n; i++)
        w->fibers[i].state = ST_READY;
      continue;
    }
    // Some threads wait at a barrier that the others can never reach: on a
    // GPU this hangs or corrupts, so it is an error here.
    if (!one_site) {
      const Fiber *b1 = nullptr;
      uint32_t n0 = 0;
      for (uint32_t i = 0; i < n; i++) {
        const Fiber *f = &w->fibers[i];
        if (f->state != ST_BAR)
          continue;
        if (same_site(f->bfile, f->bline, 0, b0->bfile, b0->bline, 0))
          n0++;
        else if (!b1)
          b1 = f;
      }
      fail_group(w,
                 "threadgroup_barrier at %s:%u reached by %u of %u threads, the others wait at %s:%u "
                 "(divergent barrier)",
                 b0->bfile, b0->bline, n0, n, b1->bfile, b1->bline);
    } else {
      fail_group(w, "threadgroup_barrier at %s:%u reached by %u of %u threads (divergent barrier: %u returned "
                    "without reaching it)",
                 b0->bfile, b0->bline, bar, n, done);
    }
    return false;
  }
  if (cost_enabled)
    sum_cost(w);
  int64_t st = int64_t(w->used - w->dyn_end);
  int64_t old = __atomic_load_n(&d->static_tg, __ATOMIC_RELAXED);
  while (st > old && !__atomic_compare_exchange_n(&d->static_tg, &old, st, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return true;
}

// ---------------------------------------------------------------------------
// Faults. A read or write through a thread pointer that went wild where no
// check saw it (`p += n; p[1]`, docs/msl-subset.md) faults, SIGSEGV or, for
// an address x86-64 cannot map, SIGBUS, which the Go runtime takes for a
// crash of the process. The library's handler takes a fault whose stack
// pointer lies in its workers' fiber stacks: the dispatch fails and the
// thread is abandoned, as at a failed check, at no cost to the kernels.
// Any other fault goes on to the handler installed before (the Go
// runtime's, whose nil pointer panics need it, or another library's).
// Libraries are never unloaded, so the chain stays valid.
// ---------------------------------------------------------------------------

static Worker *fault_workers[1024];
static int nfault_workers;
static struct sigaction fault_prev[2]; // SIGSEGV, SIGBUS

static Worker *new_worker() {
  Worker *w = (Worker *)calloc(1, sizeof(Worker));
  // The slots are SLOT-aligned, as stack_check reads what is left of a
  // stack from the stack pointer's offset in its slot: map one more and
  // give back the ends.
  size_t len = size_t(SLOT) * MAX_THREADS;
  char *m = (char *)mmap(nullptr, len + SLOT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return nullptr;
  w->stacks = (char *)((uintptr_t(m) + SLOT - 1) & ~uintptr_t(SLOT - 1));
  if (w->stacks > m)
    munmap(m, size_t(w->stacks - m));
  if (char *end = w->stacks + len; end < m + len + SLOT)
    munmap(end, size_t(m + len + SLOT - end));
  w->arena_cap = 1 << 20;
  w->arena = (char *)mmap(nullptr, w->arena_cap * 2 + w->arena_cap * sizeof(Shadow), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0);
  if (w->arena == MAP_FAILED)
    return nullptr;
  w->snap = w->arena + w->arena_cap;
  w->shadow = (Shadow *)(w->arena + 2 * w->arena_cap);
  if (int i = __atomic_fetch_add(&nfault_workers, 1, __ATOMIC_ACQ_REL); i < 1024)
    __atomic_store_n(&fault_workers[i], w, __ATOMIC_RELEASE);
  return w;
}

} // namespace __emu
} // namespace metal

using namespace metal::__emu;

EXPORT int64_t msl_emu_abi() { return ABI; }
EXPORT int64_t msl_emu_desc_size() { return int64_t(sizeof(Desc)); }

EXPORT int64_t msl_emu_find_kernel(const char *name) {
  for (int i = 0; i < nkernels; i++)
    if (strcmp(kernels[i]->name, name) == 0)
      return i;
  return -1;
}

// msl_emu_static_tg is kernel k's static threadgroup memory: its threadgroup
// variables laid out in declaration order, as tg_static places them.
EXPORT int64_t msl_emu_static_tg(int64_t k) {
  if (k < 0 || k >= nkernels)
    return -1;
  const void *fn = kernels[k]->fn();
  size_t off = 0;
  for (int last = -1;;) {
    const TGRecord *next = nullptr;
    for (int i = 0; i < ntgregs; i++)
      if (tgregs[i].kernel == fn && tgregs[i].site > last && (!next || tgregs[i].site < next->site))
        next = &tgregs[i];
    if (!next)
      return int64_t(off);
    off = (off + next->align - 1) / next->align * next->align + next->size;
    last = next->site;
  }
}

// The fault handler (see "Faults" above): cold, out of the hot code's
// way, where placed among it the decode GEMVs ran 4% slower from code
// layout alone (docs/msl-subset.md).
[[gnu::cold]] static uintptr_t fault_sp(void *ctx) {
  const ucontext_t *uc = (const ucontext_t *)ctx;
#if defined(__linux__) && defined(__x86_64__)
  return uintptr_t(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__linux__) && defined(__aarch64__)
  return uintptr_t(uc->uc_mcontext.sp);
#elif defined(__APPLE__) && defined(__aarch64__)
  return uintptr_t(uc->uc_mcontext->__ss.__sp);
#elif defined(__APPLE__) && defined(__x86_64__)
  return uintptr_t(uc->uc_mcontext->__ss.__rsp);
#else
  (void)uc;
  return 0;
#endif
}

[[gnu::cold]] static void on_fault(int sig, siginfo_t *info, void *ctx) {
  const char *sp = (const char *)fault_sp(ctx);
  bool ours = false;
  int n = __atomic_load_n(&nfault_workers, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < 1024 && !ours; i++) {
    const Worker *w = __atomic_load_n(&fault_workers[i], __ATOMIC_ACQUIRE);
    ours = w && sp && on_stack(w, sp);
  }
  // The thread-local fiber only once the stack says this thread runs one
  // of ours: its thread-local block then exists, and reading it allocates
  // nothing.
  Fiber *f = ours ? cur : nullptr;
  if (!f) {
    const struct sigaction &p = fault_prev[sig == SIGBUS];
    if (p.sa_flags & SA_SIGINFO) {
      if (p.sa_sigaction)
        p.sa_sigaction(sig, info, ctx);
    } else if (p.sa_handler == SIG_DFL || p.sa_handler == SIG_IGN) {
      sigaction(sig, &p, nullptr); // the access faults again, to the default action
    } else {
      p.sa_handler(sig);
    }
    return;
  }
  // The thread leaves the handler by switching to its scheduler, not by
  // returning: unblock what returning would have.
  pthread_sigmask(SIG_SETMASK, &((ucontext_t *)ctx)->uc_sigmask, nullptr);
  if (info->si_addr)
    fail("a read or write through a wild pointer faulted at %p (a thread pointer moved past its variable, or made "
         "from an integer: msl-emu does not know the line)", info->si_addr);
  else
    fail("a read or write through a wild pointer faulted at an address the CPU cannot map (a thread pointer moved "
         "past its variable, or made from an integer: msl-emu does not know the line)");
  abandon();
}

[[gnu::cold, gnu::noinline]] static void install_fault_handler() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART; // SA_ONSTACK: Go's handler, chained to, runs on its signal stack
  sigfillset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &fault_prev[0]);
  sigaction(SIGBUS, &sa, &fault_prev[1]);
}

// msl_emu_begin prepares a dispatch: function constant values and the race
// check flag are library-wide, so Go serialises dispatches per library.
EXPORT int64_t msl_emu_begin(Desc *d) {
  if (d->abi != ABI || d->kernel < 0 || d->kernel >= nkernels)
    return -1;
  static bool faults;
  if (!faults) { // Go serialises a library's dispatches
    install_fault_handler();
    faults = true;
  }
  race_enabled = (d->flags & 1) != 0;
  cost_enabled = (d->flags & 2) != 0;
  lanes_reversed = (d->flags & 8) != 0;
  fp_enabled = cost_enabled && (d->flags & 4) != 0 && d->nfp > 0;
  fp_ranges = d->fp;
  fp_nranges = d->nfp;
  stop_word = &d->errflag;
  for (int i = 0; i < nfcsets; i++)
    fcsets[i](d->fcs, d->nfc);
  d->next = d->finished = 0;
  d->c_rd = d->c_wr = d->c_ld = d->c_st = d->c_sgld = d->c_bar = d->c_sg = d->c_threads = d->c_sgld_max = 0;
  return 0;
}

// msl_emu_work runs threadgroups of the dispatch until none is left; several
// OS threads may call it at once.
EXPORT void msl_emu_work(Desc *d) {
  if (!tw) {
    tw = new_worker();
    if (!tw) {
      snprintf(d->err, sizeof d->err, "msl-emu: cannot map fiber stacks");
      __atomic_store_n(&d->errflag, 1, __ATOMIC_SEQ_CST);
      return;
    }
  }
  Worker *w = tw;
  w->d = d;
  w->k = kernels[d->kernel];
  memset(w->c, 0, sizeof w->c);
  memset(w->fpc, 0, sizeof w->fpc);
  w->fphint = 0;
  int64_t total = d->groups[0] * d->groups[1] * d->groups[2];
  for (;;) {
    if (__atomic_load_n(&d->errflag, __ATOMIC_RELAXED))
      break;
    int64_t i = __atomic_fetch_add(&d->next, 1, __ATOMIC_RELAXED);
    if (i >= total)
      break;
    uint32_t gx = uint32_t(i % d->groups[0]);
    uint32_t gy = uint32_t((i / d->groups[0]) % d->groups[1]);
    uint32_t gz = uint32_t(i / (d->groups[0] * d->groups[1]));
    if (!run_group(w, gx, gy, gz))
      break;
    __atomic_fetch_add(&d->finished, 1, __ATOMIC_RELAXED);
  }
  int64_t *out = &d->c_rd;
  for (int i = 0; i < 8; i++)
    if (w->c[i])
      __atomic_fetch_add(&out[i], w->c[i], __ATOMIC_RELAXED);
  for (int64_t m = __atomic_load_n(&d->c_sgld_max, __ATOMIC_RELAXED); w->c[8] > m;)
    if (__atomic_compare_exchange_n(&d->c_sgld_max, &m, w->c[8], false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      break;
  for (int64_t i = 0; i < fp_nranges && i < NBUF; i++)
    for (int k = 0; k < 2; k++)
      if (w->fpc[i][k])
        __atomic_fetch_add(&fp_ranges[i].counted[k], w->fpc[i][k], __ATOMIC_RELAXED);
  w->d = nullptr;
  w->k = nullptr;
}
