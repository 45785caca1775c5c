/*
 * NVTX injection library for tests: records domain creation, category names, registered strings,
 * push/pop and start/end (with message, colour, category and payload) as text lines.
 *
 * Load it with NVTX_INJECTION64_PATH=/path/libnvtx_recorder.so before the process makes its first NVTX
 * call; it writes to the file named by NVTX_RECORDER_OUT (default: stderr) and flushes at exit.
 * Lines (tab separated; DOMAIN and CATEGORY when they happen, range events in call order at exit):
 *   DOMAIN  <domain>
 *   CATEGORY <domain> <id> <name>
 *   PUSH  <tid> <domain> <message> <colorType> <argb hex> <category> <payloadType> <payload>
 *   POP   <tid> <domain>
 *   START <tid> <domain> <range id> <message> <colorType> <argb hex> <category> <payloadType> <payload>
 *   END   <tid> <domain> <range id>
 * Built by tests/nvtx_inject/build.py with gcc against the nvidia-nvtx wheel's headers.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Events are stored as fixed-size binary records in per-thread chunks (no lock, no formatting, no
 * syscall per event: the benchmark measures NVTX overhead with a recording tool attached, as a real
 * tool like Nsight would record it) and written out as text, in global order, at process exit.
 */
enum { EV_PUSH = 1, EV_POP, EV_START, EV_END };

typedef struct {
    unsigned long long seq;
    int kind;
    long tid;
    const char *domain;
    const char *msg; /* registered strings live forever; ASCII messages are copied */
    int colorType;
    uint32_t color;
    uint32_t category;
    int payloadType;
    uint64_t payload; /* raw 8 bytes of the payload union */
    unsigned long long rid;
} rec_t;

#define CHUNK 65536
typedef struct chunk {
    struct chunk *next_all; /* all chunks of all threads, for the final dump */
    size_t n;
    rec_t r[CHUNK];
} chunk_t;

static FILE *g_out = NULL;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* meta lines and the chunk list */
static chunk_t *g_chunks = NULL;
static unsigned long long g_seq = 0;
static unsigned long long g_next_range = 1;
static __thread chunk_t *t_chunk = NULL;
static __thread long t_tid = 0;

static const char *domain_name(nvtxDomainHandle_t d) { return d ? (const char *)d : "(default)"; }

static long tid(void) {
    if (!t_tid) t_tid = (long)syscall(SYS_gettid);
    return t_tid;
}

static rec_t *new_rec(int kind, nvtxDomainHandle_t d) {
    chunk_t *c = t_chunk;
    if (!c || c->n == CHUNK) {
        c = (chunk_t *)calloc(1, sizeof(chunk_t));
        if (!c) return NULL;
        pthread_mutex_lock(&g_lock);
        c->next_all = g_chunks;
        g_chunks = c;
        pthread_mutex_unlock(&g_lock);
        t_chunk = c;
    }
    rec_t *r = &c->r[c->n];
    r->seq = __atomic_fetch_add(&g_seq, 1, __ATOMIC_RELAXED);
    r->kind = kind;
    r->tid = tid();
    r->domain = domain_name(d);
    r->msg = NULL;
    r->colorType = -1;
    r->payloadType = -1;
    return r;
}

/* Make the record filled in by the calling thread visible to dump(). */
static void publish(void) { __atomic_store_n(&t_chunk->n, t_chunk->n + 1, __ATOMIC_RELEASE); }

static void fill_attrs(rec_t *r, const nvtxEventAttributes_t *a) {
    if (!a) { r->msg = "(none)"; return; }
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: r->msg = a->message.ascii ? strdup(a->message.ascii) : ""; break;
    case NVTX_MESSAGE_TYPE_REGISTERED: r->msg = a->message.registered ? (const char *)a->message.registered : ""; break;
    case NVTX_MESSAGE_UNKNOWN: r->msg = "(none)"; break;
    default: r->msg = "(other)"; break;
    }
    r->colorType = a->colorType;
    r->color = a->color;
    r->category = a->category;
    r->payloadType = a->payloadType;
    memcpy(&r->payload, &a->payload, sizeof r->payload);
}

static void payload_text(const rec_t *r, char *buf, size_t n) {
    union { uint64_t u; int64_t i; double d; uint32_t u32; int32_t i32; float f; } p;
    memcpy(&p, &r->payload, sizeof p);
    switch (r->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: snprintf(buf, n, "%llu", (unsigned long long)p.u); break;
    case NVTX_PAYLOAD_TYPE_INT64: snprintf(buf, n, "%lld", (long long)p.i); break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: snprintf(buf, n, "%.17g", p.d); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: snprintf(buf, n, "%u", p.u32); break;
    case NVTX_PAYLOAD_TYPE_INT32: snprintf(buf, n, "%d", p.i32); break;
    case NVTX_PAYLOAD_TYPE_FLOAT: snprintf(buf, n, "%.9g", (double)p.f); break;
    default: snprintf(buf, n, "-"); break;
    }
}

static nvtxDomainHandle_t NVTX_API h_domain_create(const char *name) {
    pthread_mutex_lock(&g_lock);
    fprintf(g_out, "DOMAIN\t%s\n", name);
    pthread_mutex_unlock(&g_lock);
    return (nvtxDomainHandle_t)strdup(name);
}

static void NVTX_API h_domain_destroy(nvtxDomainHandle_t d) { (void)d; /* keep names valid for the dump */ }

static nvtxStringHandle_t NVTX_API h_register_string(nvtxDomainHandle_t d, const char *s) {
    (void)d;
    return (nvtxStringHandle_t)strdup(s);
}

static void NVTX_API h_name_category(nvtxDomainHandle_t d, uint32_t id, const char *name) {
    pthread_mutex_lock(&g_lock);
    fprintf(g_out, "CATEGORY\t%s\t%u\t%s\n", domain_name(d), id, name);
    pthread_mutex_unlock(&g_lock);
}

static int NVTX_API h_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    rec_t *r = new_rec(EV_PUSH, d);
    if (r) { fill_attrs(r, a); publish(); }
    return 0;
}

static int NVTX_API h_pop(nvtxDomainHandle_t d) {
    if (new_rec(EV_POP, d)) publish();
    return 0;
}

static nvtxRangeId_t NVTX_API h_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    unsigned long long rid = __atomic_fetch_add(&g_next_range, 1, __ATOMIC_RELAXED);
    rec_t *r = new_rec(EV_START, d);
    if (r) { fill_attrs(r, a); r->rid = rid; publish(); }
    return (nvtxRangeId_t)rid;
}

static void NVTX_API h_end(nvtxDomainHandle_t d, nvtxRangeId_t rid) {
    rec_t *r = new_rec(EV_END, d);
    if (r) { r->rid = (unsigned long long)rid; publish(); }
}

static int by_seq(const void *a, const void *b) {
    const rec_t *x = *(const rec_t *const *)a, *y = *(const rec_t *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void dump(void) {
    pthread_mutex_lock(&g_lock);
    size_t total = 0;
    for (chunk_t *c = g_chunks; c; c = c->next_all) total += __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
    rec_t **all = (rec_t **)malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (chunk_t *c = g_chunks; c && all; c = c->next_all) {
        size_t n = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
        for (size_t i = 0; i < n && k < total; i++) all[k++] = &c->r[i];
    }
    if (all) {
        qsort(all, k, sizeof *all, by_seq);
        char pay[64];
        for (size_t i = 0; i < k; i++) {
            const rec_t *r = all[i];
            switch (r->kind) {
            case EV_PUSH:
                payload_text(r, pay, sizeof pay);
                fprintf(g_out, "PUSH\t%ld\t%s\t%s\t%d\t%08x\t%u\t%d\t%s\n", r->tid, r->domain, r->msg, r->colorType,
                        r->color, r->category, r->payloadType, pay);
                break;
            case EV_POP: fprintf(g_out, "POP\t%ld\t%s\n", r->tid, r->domain); break;
            case EV_START:
                payload_text(r, pay, sizeof pay);
                fprintf(g_out, "START\t%ld\t%s\t%llu\t%s\t%d\t%08x\t%u\t%d\t%s\n", r->tid, r->domain, r->rid, r->msg,
                        r->colorType, r->color, r->category, r->payloadType, pay);
                break;
            case EV_END: fprintf(g_out, "END\t%ld\t%s\t%llu\n", r->tid, r->domain, r->rid); break;
            }
        }
        free(all);
    }
    fflush(g_out);
    pthread_mutex_unlock(&g_lock);
}

#define SET(table, id, fn)                                                                  \
    do {                                                                                    \
        if ((id) < size && (table)[(id)]) *(table)[(id)] = (NvtxFunctionPointer)(fn);       \
    } while (0)

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    const char *path = getenv("NVTX_RECORDER_OUT");
    g_out = path && *path ? fopen(path, "w") : stderr;
    if (!g_out) return 0;
    setvbuf(g_out, NULL, _IOFBF, 1 << 20);
    atexit(dump);

    const NvtxExportTableCallbacks *etbl = (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!etbl) return 0;
    NvtxFunctionTable table = 0;
    unsigned int size = 0;
    if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
    SET(table, NVTX_CBID_CORE2_DomainCreateA, h_domain_create);
    SET(table, NVTX_CBID_CORE2_DomainDestroy, h_domain_destroy);
    SET(table, NVTX_CBID_CORE2_DomainRegisterStringA, h_register_string);
    SET(table, NVTX_CBID_CORE2_DomainNameCategoryA, h_name_category);
    SET(table, NVTX_CBID_CORE2_DomainRangePushEx, h_push);
    SET(table, NVTX_CBID_CORE2_DomainRangePop, h_pop);
    SET(table, NVTX_CBID_CORE2_DomainRangeStartEx, h_start);
    SET(table, NVTX_CBID_CORE2_DomainRangeEnd, h_end);
    return 1;
}
