/*
 * NVTX injection library for tests: records domain creation, category names, registered strings,
 * push/pop and start/end (with message, colour, category and payload) as text lines.
 *
 * Load it with NVTX_INJECTION64_PATH=/path/libnvtx_recorder.so before the process makes its first NVTX
 * call; it writes to the file named by NVTX_RECORDER_OUT (default: stderr) and flushes at exit.
 * Lines (tab separated):
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

static FILE *g_out = NULL;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long g_next_range = 1;

/* Handles are pointers to heap strings: domain handle -> domain name, string handle -> the string. */
static const char *domain_name(nvtxDomainHandle_t d) { return d ? (const char *)d : "(default)"; }

static long tid(void) { return (long)syscall(SYS_gettid); }

static void message_of(const nvtxEventAttributes_t *a, char *buf, size_t n) {
    if (!a) { snprintf(buf, n, "(none)"); return; }
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: snprintf(buf, n, "%s", a->message.ascii ? a->message.ascii : ""); break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
        snprintf(buf, n, "%s", a->message.registered ? (const char *)a->message.registered : ""); break;
    case NVTX_MESSAGE_UNKNOWN: snprintf(buf, n, "(none)"); break;
    default: snprintf(buf, n, "(type %d)", a->messageType); break;
    }
}

static void payload_of(const nvtxEventAttributes_t *a, char *buf, size_t n) {
    switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: snprintf(buf, n, "%llu", (unsigned long long)a->payload.ullValue); break;
    case NVTX_PAYLOAD_TYPE_INT64: snprintf(buf, n, "%lld", (long long)a->payload.llValue); break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: snprintf(buf, n, "%.17g", a->payload.dValue); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: snprintf(buf, n, "%u", a->payload.uiValue); break;
    case NVTX_PAYLOAD_TYPE_INT32: snprintf(buf, n, "%d", a->payload.iValue); break;
    case NVTX_PAYLOAD_TYPE_FLOAT: snprintf(buf, n, "%.9g", (double)a->payload.fValue); break;
    default: snprintf(buf, n, "-"); break;
    }
}

static void emit_attrs(const char *kind, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a, long long rid) {
    char msg[512], pay[64];
    message_of(a, msg, sizeof msg);
    if (a) payload_of(a, pay, sizeof pay); else snprintf(pay, sizeof pay, "-");
    pthread_mutex_lock(&g_lock);
    if (rid >= 0)
        fprintf(g_out, "%s\t%ld\t%s\t%lld\t%s\t%d\t%08x\t%u\t%d\t%s\n", kind, tid(), domain_name(d), rid, msg,
                a ? a->colorType : -1, a ? a->color : 0u, a ? a->category : 0u, a ? a->payloadType : -1, pay);
    else
        fprintf(g_out, "%s\t%ld\t%s\t%s\t%d\t%08x\t%u\t%d\t%s\n", kind, tid(), domain_name(d), msg,
                a ? a->colorType : -1, a ? a->color : 0u, a ? a->category : 0u, a ? a->payloadType : -1, pay);
    pthread_mutex_unlock(&g_lock);
}

static nvtxDomainHandle_t NVTX_API h_domain_create(const char *name) {
    pthread_mutex_lock(&g_lock);
    fprintf(g_out, "DOMAIN\t%s\n", name);
    pthread_mutex_unlock(&g_lock);
    return (nvtxDomainHandle_t)strdup(name);
}

static void NVTX_API h_domain_destroy(nvtxDomainHandle_t d) { (void)d; /* keep names valid for late events */ }

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
    emit_attrs("PUSH", d, a, -1);
    return 0;
}

static int NVTX_API h_pop(nvtxDomainHandle_t d) {
    pthread_mutex_lock(&g_lock);
    fprintf(g_out, "POP\t%ld\t%s\n", tid(), domain_name(d));
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static nvtxRangeId_t NVTX_API h_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&g_lock);
    unsigned long long rid = g_next_range++;
    pthread_mutex_unlock(&g_lock);
    emit_attrs("START", d, a, (long long)rid);
    return (nvtxRangeId_t)rid;
}

static void NVTX_API h_end(nvtxDomainHandle_t d, nvtxRangeId_t rid) {
    pthread_mutex_lock(&g_lock);
    fprintf(g_out, "END\t%ld\t%s\t%llu\n", tid(), domain_name(d), (unsigned long long)rid);
    pthread_mutex_unlock(&g_lock);
}

static void close_out(void) {
    pthread_mutex_lock(&g_lock);
    if (g_out) fflush(g_out);
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
    setvbuf(g_out, NULL, _IOFBF, 1 << 20); /* buffered: the benchmark measures the call, not a syscall */
    atexit(close_out);

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
