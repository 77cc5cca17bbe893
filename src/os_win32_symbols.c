/*
 * src/os_win32_symbols.c - symbolization on Windows (hk_os_symbolize in
 * src/os.h): the module holding each address (GetModuleHandleEx), its
 * nearest exported symbol (the module's PE export directory), and with
 * HK_OS_SYMBOLIZE_LINES function names: from the module file's COFF symbol
 * table (MinGW keeps one, static functions included, unless stripped),
 * then names and file:line from DbgHelp when dbghelp.dll loads and knows
 * the module (PDB for MSVC builds). Without either a frame still has its
 * module and offset.
 *
 * Invariants: module paths are kept in a static table (one entry per
 * module base, forward slashes, so callers can cut the directory at the
 * last '/'), never freed: the strings stay valid for the process's life.
 * dbghelp.dll is loaded and initialized at the first symbolization with
 * lines (a run without a report loads no extra module), unless
 * HEAPKIT_NO_DBGHELP was set when hk_os_symbolize_init read it;
 * DbgHelp is single-threaded, and so are the callers (os.h: callers
 * serialize). A module's COFF symbol table is read once (hk_os_alloc'd,
 * kept for the process's life; up to SYM_COFF_MODULES modules). Nothing
 * here calls malloc (DbgHelp itself allocates from its own heap).
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

#include <dbghelp.h>

/* ---- modules --------------------------------------------------------------------- */

#define SYM_MODULES 64
static struct {
    uintptr_t base;
    char path[MAX_PATH];
} sym_modules[SYM_MODULES];
static int sym_nmodules;

uintptr_t hk_os_module_base(const void *addr) {
    HMODULE m = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &m))
        return 0;
    return (uintptr_t)m;
}

uintptr_t hk_os_main_base(void) { return (uintptr_t)GetModuleHandleW(NULL); }

/* The path of the module at base, from the table (added on first sight). */
static const char *sym_module_path(uintptr_t base) {
    for (int i = 0; i < sym_nmodules; i++)
        if (sym_modules[i].base == base) return sym_modules[i].path;
    if (sym_nmodules == SYM_MODULES) return NULL;
    char *p = sym_modules[sym_nmodules].path;
    DWORD n = GetModuleFileNameA((HMODULE)base, p, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) return NULL;
    for (DWORD i = 0; i < n; i++)
        if (p[i] == '\\') p[i] = '/';
    sym_modules[sym_nmodules++].base = base;
    return p;
}

/* The nearest export of the module at base at or below pc (its name and
 * address), from the PE export directory. */
static void sym_nearest_export(uintptr_t base, uintptr_t pc, hk_os_symbol *s) {
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
    if (dos->e_magic != IMAGE_DOS_SIGNATURE) return;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + (uintptr_t)dos->e_lfanew);
    if (nt->Signature != IMAGE_NT_SIGNATURE ||
        nt->OptionalHeader.NumberOfRvaAndSizes <= IMAGE_DIRECTORY_ENTRY_EXPORT)
        return;
    const IMAGE_DATA_DIRECTORY *dd = &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
    if (!dd->VirtualAddress || !dd->Size) return;
    const IMAGE_EXPORT_DIRECTORY *ed = (const IMAGE_EXPORT_DIRECTORY *)(base + dd->VirtualAddress);
    const DWORD *funcs = (const DWORD *)(base + ed->AddressOfFunctions);
    const DWORD *names = (const DWORD *)(base + ed->AddressOfNames);
    const WORD *ords = (const WORD *)(base + ed->AddressOfNameOrdinals);
    uintptr_t best = 0;
    const char *best_name = NULL;
    for (DWORD i = 0; i < ed->NumberOfNames; i++) {
        if (ords[i] >= ed->NumberOfFunctions) continue;
        DWORD rva = funcs[ords[i]];
        if (rva >= dd->VirtualAddress && rva < dd->VirtualAddress + dd->Size) continue; /* a forwarder */
        uintptr_t a = base + rva;
        if (a <= pc && a > best) {
            best = a;
            best_name = (const char *)(base + names[i]);
        }
    }
    if (best_name) {
        s->name = best_name;
        s->name_addr = best;
    }
}

/* ---- COFF symbol tables ------------------------------------------------------------ */

#define SYM_COFF_MODULES 8
#define SYM_COFF_RECORD  18 /* IMAGE_SIZEOF_SYMBOL */
static struct {
    uintptr_t base;
    int state; /* 1 read, -1 none */
    const unsigned char *syms;
    DWORD nsyms;
    const char *strtab; /* starts with its own 4-byte size */
    DWORD strsize;
} sym_coff[SYM_COFF_MODULES];
static int sym_ncoff;

/* Reads n bytes at offset off of file h into buf. */
static bool sym_read_at(HANDLE h, DWORD off, void *buf, DWORD n) {
    LARGE_INTEGER at;
    at.QuadPart = off;
    DWORD got = 0;
    return SetFilePointerEx(h, at, NULL, FILE_BEGIN) && ReadFile(h, buf, n, &got, NULL) && got == n;
}

/* The COFF symbol table of the module at base (read from its file once). */
static int sym_coff_of(uintptr_t base, const char *path) {
    for (int i = 0; i < sym_ncoff; i++)
        if (sym_coff[i].base == base) return sym_coff[i].state > 0 ? i : -1;
    if (sym_ncoff == SYM_COFF_MODULES || !path) return -1;
    int k = sym_ncoff++;
    sym_coff[k].base = base;
    sym_coff[k].state = -1;
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + (uintptr_t)dos->e_lfanew);
    DWORD off = nt->FileHeader.PointerToSymbolTable, nsyms = nt->FileHeader.NumberOfSymbols;
    if (!off || !nsyms || nsyms > (1u << 24)) return -1;
    HANDLE h = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE) return -1;
    DWORD symbytes = nsyms * SYM_COFF_RECORD, strsize = 0;
    unsigned char *mem = NULL;
    if (sym_read_at(h, off + symbytes, &strsize, 4) && strsize >= 4 && strsize < (1u << 28)) {
        mem = (unsigned char *)hk_os_alloc((size_t)symbytes + strsize);
        if (mem && !sym_read_at(h, off, mem, symbytes + strsize)) {
            hk_os_release(mem, (size_t)symbytes + strsize);
            mem = NULL;
        }
    }
    CloseHandle(h);
    if (!mem) return -1;
    sym_coff[k].syms = mem;
    sym_coff[k].nsyms = nsyms;
    sym_coff[k].strtab = (const char *)mem + symbytes;
    sym_coff[k].strsize = strsize;
    sym_coff[k].state = 1;
    return k;
}

/* The function of the COFF symbol table nearest at or below pc, into func. */
static void sym_coff_resolve(hk_os_symbol *s) {
    int k = sym_coff_of(s->base, s->module);
    if (k < 0) return;
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)s->base;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(s->base + (uintptr_t)dos->e_lfanew);
    const IMAGE_SECTION_HEADER *sect = IMAGE_FIRST_SECTION(nt);
    WORD nsect = nt->FileHeader.NumberOfSections;
    uintptr_t pc = s->return_address ? s->pc - 1 : s->pc, best = 0;
    const unsigned char *best_rec = NULL;
    for (DWORD i = 0; i < sym_coff[k].nsyms; i++) {
        const unsigned char *r = sym_coff[k].syms + (size_t)i * SYM_COFF_RECORD;
        DWORD value;
        SHORT secno;
        WORD type;
        memcpy(&value, r + 8, 4);
        memcpy(&secno, r + 12, 2);
        memcpy(&type, r + 14, 2);
        BYTE cls = r[16], naux = r[17];
        i += naux;
        if (secno < 1 || secno > nsect || ((type >> 4) & 3) != 2) continue; /* functions only */
        if (cls != IMAGE_SYM_CLASS_EXTERNAL && cls != IMAGE_SYM_CLASS_STATIC) continue;
        uintptr_t a = s->base + sect[secno - 1].VirtualAddress + value;
        if (a <= pc && a >= best) {
            best = a;
            best_rec = r;
        }
    }
    if (!best_rec) return;
    char name[9];
    const char *n = name;
    DWORD zero, stroff;
    memcpy(&zero, best_rec, 4);
    memcpy(&stroff, best_rec + 4, 4);
    if (zero == 0) {
        if (stroff < 4 || stroff >= sym_coff[k].strsize) return;
        n = sym_coff[k].strtab + stroff;
    } else {
        memcpy(name, best_rec, 8);
        name[8] = 0;
    }
    size_t m = strnlen(n, sizeof s->func - 1);
    memcpy(s->func, n, m);
    s->func[m] = 0;
}

/* ---- DbgHelp ------------------------------------------------------------------------ */

typedef DWORD(WINAPI *sym_set_options_fn)(DWORD);
typedef BOOL(WINAPI *sym_initialize_fn)(HANDLE, PCSTR, BOOL);
typedef BOOL(WINAPI *sym_from_addr_fn)(HANDLE, DWORD64, PDWORD64, PSYMBOL_INFO);
typedef BOOL(WINAPI *sym_line_fn)(HANDLE, DWORD64, PDWORD, PIMAGEHLP_LINE64);
typedef BOOL(WINAPI *sym_refresh_fn)(HANDLE);

static struct {
    sym_set_options_fn set_options;
    sym_initialize_fn initialize;
    sym_from_addr_fn from_addr;
    sym_line_fn line;
    sym_refresh_fn refresh;
} sym_dbg;
static int sym_dbg_wanted; /* HEAPKIT_NO_DBGHELP unset (read at init) */
static int sym_dbg_tried;
static int sym_dbg_loaded; /* every function was found */
static int sym_dbg_ready;  /* SymInitialize succeeded */
static int sym_looked;

static FARPROC sym_proc(HMODULE h, const char *name) { return GetProcAddress(h, name); }

void hk_os_symbolize_init(void) {
    if (__atomic_load_n(&sym_looked, __ATOMIC_ACQUIRE)) return;
    sym_dbg_wanted = GetEnvironmentVariableA("HEAPKIT_NO_DBGHELP", NULL, 0) == 0;
    __atomic_store_n(&sym_looked, 1, __ATOMIC_RELEASE);
}

static void sym_dbghelp_load(void) {
    if (sym_dbg_tried || !sym_dbg_wanted) return;
    sym_dbg_tried = 1;
    HMODULE h = LoadLibraryA("dbghelp.dll");
    if (h) {
        FARPROC f[5] = {sym_proc(h, "SymSetOptions"), sym_proc(h, "SymInitialize"),
                        sym_proc(h, "SymFromAddr"), sym_proc(h, "SymGetLineFromAddr64"),
                        sym_proc(h, "SymRefreshModuleList")};
        if (f[0] && f[1] && f[2] && f[3]) {
            memcpy(&sym_dbg.set_options, &f[0], sizeof f[0]);
            memcpy(&sym_dbg.initialize, &f[1], sizeof f[1]);
            memcpy(&sym_dbg.from_addr, &f[2], sizeof f[2]);
            memcpy(&sym_dbg.line, &f[3], sizeof f[3]);
            if (f[4]) memcpy(&sym_dbg.refresh, &f[4], sizeof f[4]);
            sym_dbg_loaded = 1;
        }
    }
}

/* Fills func and loc of s from DbgHelp. */
static void sym_dbghelp_resolve(hk_os_symbol *s) {
    HANDLE proc = GetCurrentProcess();
    DWORD64 a = (DWORD64)(s->return_address ? s->pc - 1 : s->pc);
    union {
        SYMBOL_INFO info;
        char bytes[sizeof(SYMBOL_INFO) + 256];
    } u;
    memset(&u, 0, sizeof u.info);
    u.info.SizeOfStruct = sizeof u.info;
    u.info.MaxNameLen = 255;
    DWORD64 disp = 0;
    if (sym_dbg.from_addr(proc, a, &disp, &u.info) && u.info.NameLen > 0) {
        size_t m = u.info.NameLen < sizeof s->func ? u.info.NameLen : sizeof s->func - 1;
        memcpy(s->func, u.info.Name, m);
        s->func[m] = 0;
    }
    IMAGEHLP_LINE64 line;
    memset(&line, 0, sizeof line);
    line.SizeOfStruct = sizeof line;
    DWORD ldisp = 0;
    if (sym_dbg.line(proc, a, &ldisp, &line) && line.FileName && line.LineNumber > 0) {
        char num[16];
        int k = 0;
        unsigned v = (unsigned)line.LineNumber;
        do {
            num[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v && k < 15);
        const char *file = line.FileName;
        size_t fl = strlen(file), cap = sizeof s->loc;
        if (fl + 2 + (size_t)k > cap) { /* keep the end of a long path */
            file += fl + 2 + (size_t)k - cap;
            fl = strlen(file);
        }
        memcpy(s->loc, file, fl);
        for (size_t i = 0; i < fl; i++)
            if (s->loc[i] == '\\') s->loc[i] = '/';
        s->loc[fl] = ':';
        size_t o = fl + 1;
        while (k) s->loc[o++] = num[--k];
        s->loc[o] = 0;
    }
}

void hk_os_symbolize(hk_os_symbol *syms, int n, unsigned flags) {
    for (int i = 0; i < n; i++) {
        hk_os_symbol *s = &syms[i];
        s->module = NULL;
        s->base = 0;
        s->name = NULL;
        s->name_addr = 0;
        s->func[0] = 0;
        s->loc[0] = 0;
        uintptr_t base = hk_os_module_base((const void *)s->pc);
        if (!base) continue;
        s->base = base;
        s->module = sym_module_path(base);
        sym_nearest_export(base, s->return_address ? s->pc - 1 : s->pc, s);
    }
    if (!(flags & HK_OS_SYMBOLIZE_LINES) || !__atomic_load_n(&sym_looked, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < n; i++)
        if (syms[i].module) sym_coff_resolve(&syms[i]);
    sym_dbghelp_load();
    if (!sym_dbg_loaded) return;
    if (!sym_dbg_ready) {
        sym_dbg.set_options(SYMOPT_UNDNAME | SYMOPT_DEFERRED_LOADS | SYMOPT_LOAD_LINES |
                            SYMOPT_FAIL_CRITICAL_ERRORS);
        sym_dbg_ready = sym_dbg.initialize(GetCurrentProcess(), NULL, TRUE) ? 1 : -1;
    } else if (sym_dbg_ready > 0 && sym_dbg.refresh) {
        (void)sym_dbg.refresh(GetCurrentProcess()); /* modules loaded since */
    }
    if (sym_dbg_ready < 0) return;
    for (int i = 0; i < n; i++)
        if (syms[i].module) sym_dbghelp_resolve(&syms[i]);
}

void *hk_os_find_function(const char *name) {
    (void)name;
    return NULL;
}

/* dbghelp ships with Windows: frames without lines there mean no PDB, which
 * the report cannot mend by naming a package. */
int hk_os_symbolize_lines_missing(void) { return 0; }
int hk_os_symbolize_lines_slow(void) { return 0; }
