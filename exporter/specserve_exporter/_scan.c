/* The exporter's hot path: find every stats line of one learned layout in a chunk of log lines,
 * and sum the values the metrics need into histograms, without a Python object per line.
 *
 * A layout ("shape", see shape.py) is a short program of operations, each matching one piece of
 * a line from the kind's marker ("Decode batch") to the end of the line: a literal text, a number
 * in one printed form (integer or decimal), True/False, any text up to the next comma, or SGLang's
 * optional iteration counter. Every operation matches possessively (it never gives back what it took), as the
 * regular expression the shape stands for does, so a line is read once, left to right.
 *
 * scan() returns None as soon as one line holding the marker is not of the shape: the caller then
 * reads that chunk with the reference parser. Numbers are converted exactly as Python's float()
 * converts them. tests/exporter/test_scan.py holds the scanner to a regex oracle of its program,
 * test_ingest.py the fast path to the reference parser.
 *
 * It keeps the GIL: the exporter has one reader thread, a 512 KiB chunk takes about 0.3 ms (a
 * scrape waits no longer than that), and PyOS_string_to_double and PyMem_* need it.
 *
 * Stable ABI (Py_LIMITED_API): one wheel works on every CPython from 3.11 on, so the SGLang image
 * can install the same wheel under its own Python.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Operation codes: the same numbers as shape.py's Op. */
enum {
    OP_LITERAL = 0, /* argument: bytes, matched exactly */
    OP_INTEGER = 1, /* \d++ */
    OP_DECIMAL = 2, /* \d++\.\d++ */
    OP_BOOLEAN = 3, /* True|False, read as 1 or 0 */
    OP_TEXT = 4,    /* [^,\n]*+ */
    OP_COUNTER = 5, /* (?: ?\[\d+\])? */
};

#define MAX_OPS 256
#define MAX_SLOTS 16
#define MAX_HISTOGRAMS 4
#define MAX_BOUNDS 64
/* Longer numbers go to the reference parser: 300 digits cannot overflow a double. */
#define MAX_NUMBER_LENGTH 300

typedef struct {
    int code;
    int slot; /* numbers, booleans: where the value goes, or -1 when it is only checked */
    const char *text;
    Py_ssize_t length;
} Op;

/* One histogram: the value in `value_slot`, counted into buckets by `bounds` (Prometheus' "le":
 * the first bound the value does not exceed) and summed, separately for each integer value of
 * `key_slot` (or all under key 0 when key_slot is -1). */
typedef struct {
    int value_slot;
    int key_slot;
    int n_bounds;
    double bounds[MAX_BOUNDS];
    Py_ssize_t n_keys;
    Py_ssize_t capacity;
    long long *keys;
    long long *counts; /* n_keys rows of n_bounds + 1 counts; the last is +Inf */
    double *sums;
} Histogram;

static const double POWERS_OF_TEN[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The number at p in the form `code` describes; returns its end, or NULL when the text is not
 * of that form. */
static const char *read_number(const char *p, const char *end, int code, double *value)
{
    const char *start = p;
    uint64_t mantissa = 0;
    int digits = 0, fraction = 0;
    while (p < end && is_digit(*p)) {
        if (digits < 19)
            mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        digits++;
        p++;
    }
    if (p == start)
        return NULL;
    if (code == OP_DECIMAL) {
        if (!(p + 1 < end && *p == '.' && is_digit(p[1])))
            return NULL;
        p++;
        while (p < end && is_digit(*p)) {
            if (digits < 19)
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
            digits++;
            fraction++;
            p++;
        }
    }
    if (digits <= 15 && fraction <= 22) {
        /* Both operands are exact doubles and IEEE division rounds correctly, so this is the
         * correctly rounded value of the decimal text: what float() returns. */
        *value = (double)mantissa / POWERS_OF_TEN[fraction];
        return p;
    }
    if (p - start > MAX_NUMBER_LENGTH)
        return NULL;
    char buffer[MAX_NUMBER_LENGTH + 1];
    memcpy(buffer, start, (size_t)(p - start));
    buffer[p - start] = '\0';
    *value = PyOS_string_to_double(buffer, NULL, NULL);
    if (*value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

/* Matches the program at p; returns the end of the line it matched, or NULL. */
static const char *match_line(const Op *ops, int n_ops, const char *p, const char *end,
                              double *slots)
{
    for (int i = 0; i < n_ops; i++) {
        const Op *op = &ops[i];
        switch (op->code) {
        case OP_LITERAL:
            if (end - p < op->length || memcmp(p, op->text, (size_t)op->length) != 0)
                return NULL;
            p += op->length;
            break;
        case OP_INTEGER:
        case OP_DECIMAL: {
            double value;
            p = read_number(p, end, op->code, &value);
            if (p == NULL)
                return NULL;
            if (op->slot >= 0)
                slots[op->slot] = value;
            break;
        }
        case OP_BOOLEAN: {
            double value;
            if (end - p >= 4 && memcmp(p, "True", 4) == 0) {
                p += 4;
                value = 1.0;
            } else if (end - p >= 5 && memcmp(p, "False", 5) == 0) {
                p += 5;
                value = 0.0;
            } else {
                return NULL;
            }
            if (op->slot >= 0)
                slots[op->slot] = value;
            break;
        }
        case OP_TEXT:
            while (p < end && *p != ',' && *p != '\n')
                p++;
            break;
        case OP_COUNTER: {
            const char *q = p;
            if (q < end && *q == ' ')
                q++;
            if (q < end && *q == '[') {
                const char *digits = ++q;
                while (q < end && is_digit(*q))
                    q++;
                if (q > digits && q < end && *q == ']')
                    p = q + 1;
            }
            break;
        }
        default:
            return NULL;
        }
    }
    /* `$`: the end of the line or of the chunk. */
    if (p < end && *p != '\n')
        return NULL;
    return p;
}

/* The text right before the marker: `guard` (a digit in it stands for any digit: the
 * timestamp's tail) followed by `behind` exactly (" TP0] "). */
static int preceded_by(const char *chunk, const char *marker_at, const char *guard,
                       Py_ssize_t guard_length, const char *behind, Py_ssize_t behind_length)
{
    if (marker_at - chunk < guard_length + behind_length)
        return 0;
    const char *b = marker_at - behind_length;
    if (memcmp(b, behind, (size_t)behind_length) != 0)
        return 0;
    const char *g = b - guard_length;
    for (Py_ssize_t i = 0; i < guard_length; i++) {
        if (is_digit(guard[i]) ? !is_digit(g[i]) : g[i] != guard[i])
            return 0;
    }
    return 1;
}

static int histogram_add(Histogram *h, const double *slots)
{
    long long key = 0;
    if (h->key_slot >= 0) {
        double k = slots[h->key_slot];
        if (!(k >= 0.0 && k < 9007199254740992.0)) /* 2^53: every integer below is exact */
            return -1;
        key = (long long)k; /* truncates, as int() does */
    }
    Py_ssize_t row = -1;
    /* A chunk holds few distinct keys (#running-req moves slowly): try the last one first. */
    if (h->n_keys > 0 && h->keys[h->n_keys - 1] == key) {
        row = h->n_keys - 1;
    } else {
        for (Py_ssize_t i = 0; i < h->n_keys; i++) {
            if (h->keys[i] == key) {
                row = i;
                break;
            }
        }
    }
    int width = h->n_bounds + 1;
    if (row < 0) {
        if (h->n_keys == h->capacity) {
            Py_ssize_t capacity = h->capacity ? 2 * h->capacity : 8;
            long long *keys = PyMem_Realloc(h->keys, (size_t)capacity * sizeof(long long));
            if (keys == NULL)
                return -2;
            h->keys = keys;
            long long *counts = PyMem_Realloc(
                h->counts, (size_t)capacity * (size_t)width * sizeof(long long));
            if (counts == NULL)
                return -2;
            h->counts = counts;
            double *sums = PyMem_Realloc(h->sums, (size_t)capacity * sizeof(double));
            if (sums == NULL)
                return -2;
            h->sums = sums;
            h->capacity = capacity;
        }
        row = h->n_keys++;
        h->keys[row] = key;
        memset(&h->counts[row * width], 0, (size_t)width * sizeof(long long));
        h->sums[row] = 0.0;
    }
    double value = slots[h->value_slot];
    int bucket = 0;
    while (bucket < h->n_bounds && value > h->bounds[bucket])
        bucket++;
    h->counts[row * width + bucket]++;
    h->sums[row] += value;
    return 0;
}

static void histograms_free(Histogram *hists, int n)
{
    for (int i = 0; i < n; i++) {
        PyMem_Free(hists[i].keys);
        PyMem_Free(hists[i].counts);
        PyMem_Free(hists[i].sums);
    }
}

/* {key: ([count per bucket, +Inf last], sum)} for one histogram. */
static PyObject *histogram_result(const Histogram *h)
{
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    int width = h->n_bounds + 1;
    for (Py_ssize_t row = 0; row < h->n_keys; row++) {
        PyObject *counts = PyList_New(width);
        if (counts == NULL)
            goto fail;
        for (int b = 0; b < width; b++) {
            PyObject *count = PyLong_FromLongLong(h->counts[row * width + b]);
            if (count == NULL) {
                Py_DECREF(counts);
                goto fail;
            }
            PyList_SetItem(counts, b, count);
        }
        PyObject *entry = Py_BuildValue("(Nd)", counts, h->sums[row]);
        PyObject *key = PyLong_FromLongLong(h->keys[row]);
        if (entry == NULL || key == NULL || PyDict_SetItem(out, key, entry) < 0) {
            Py_XDECREF(entry);
            Py_XDECREF(key);
            goto fail;
        }
        Py_DECREF(entry);
        Py_DECREF(key);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static int parse_program(PyObject *program, Op *ops, int *n_ops, int *n_slots)
{
    Py_ssize_t n = PyTuple_Size(program);
    if (n < 0)
        return -1;
    if (n > MAX_OPS) {
        PyErr_SetString(PyExc_ValueError, "program too long");
        return -1;
    }
    *n_slots = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int code;
        PyObject *arg;
        if (!PyArg_ParseTuple(PyTuple_GetItem(program, i), "iO;an operation is (code, argument)",
                              &code, &arg))
            return -1;
        ops[i].code = code;
        ops[i].slot = -1;
        ops[i].text = NULL;
        ops[i].length = 0;
        if (code == OP_LITERAL) {
            char *text;
            if (PyBytes_AsStringAndSize(arg, &text, &ops[i].length) < 0)
                return -1;
            ops[i].text = text;
        } else if (code == OP_INTEGER || code == OP_DECIMAL ||
                   (code == OP_BOOLEAN && arg != Py_None)) {
            /* A graph state read from every line is captured as 1 (True) or 0 (False). */
            long slot = PyLong_AsLong(arg);
            if (slot == -1 && PyErr_Occurred())
                return -1;
            if (slot < -1 || slot >= MAX_SLOTS) {
                PyErr_SetString(PyExc_ValueError, "slot out of range");
                return -1;
            }
            ops[i].slot = (int)slot;
            if (slot + 1 > *n_slots)
                *n_slots = (int)slot + 1;
        } else if (code < OP_LITERAL || code > OP_COUNTER) {
            PyErr_Format(PyExc_ValueError, "unknown operation %d", code);
            return -1;
        }
    }
    *n_ops = (int)n;
    return 0;
}

static int parse_histograms(PyObject *specs, Histogram *hists, int *n_hists, int n_slots)
{
    Py_ssize_t n = PyTuple_Size(specs);
    if (n < 0)
        return -1;
    if (n > MAX_HISTOGRAMS) {
        PyErr_SetString(PyExc_ValueError, "too many histograms");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Histogram *h = &hists[i];
        PyObject *bounds;
        memset(h, 0, sizeof(*h));
        if (!PyArg_ParseTuple(PyTuple_GetItem(specs, i),
                              "iiO!;a histogram is (value slot, key slot, bounds)",
                              &h->value_slot, &h->key_slot, &PyTuple_Type, &bounds))
            return -1;
        Py_ssize_t n_bounds = PyTuple_Size(bounds);
        if (h->value_slot < 0 || h->value_slot >= n_slots || h->key_slot < -1 ||
            h->key_slot >= n_slots || n_bounds > MAX_BOUNDS) {
            PyErr_SetString(PyExc_ValueError, "histogram slot or bounds out of range");
            return -1;
        }
        h->n_bounds = (int)n_bounds;
        for (Py_ssize_t b = 0; b < n_bounds; b++) {
            h->bounds[b] = PyFloat_AsDouble(PyTuple_GetItem(bounds, b));
            if (h->bounds[b] == -1.0 && PyErr_Occurred())
                return -1;
        }
    }
    *n_hists = (int)n;
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(chunk, marker, guard, behind, program, histograms) -> (lines, [histogram, ...]) | None\n\n"
"Match `program` at every occurrence of `marker` in `chunk` (complete lines). None when one of\n"
"them is not a whole line of the program. Otherwise the number of lines matched and, per\n"
"histogram spec (value slot, key slot or -1, bounds), {key: (bucket counts, sum)}.\n"
"`guard` + `behind` must precede every marker when given (see shape.py).");

static PyObject *scan(PyObject *module, PyObject *args)
{
    const char *chunk, *marker, *guard, *behind;
    Py_ssize_t chunk_length, marker_length, guard_length, behind_length;
    PyObject *program, *specs;
    Op ops[MAX_OPS];
    Histogram hists[MAX_HISTOGRAMS];
    int n_ops = 0, n_slots = 0, n_hists = 0;
    (void)module;
    if (!PyArg_ParseTuple(args, "y#y#y#y#O!O!:scan", &chunk, &chunk_length, &marker,
                          &marker_length, &guard, &guard_length, &behind, &behind_length,
                          &PyTuple_Type, &program, &PyTuple_Type, &specs))
        return NULL;
    if (marker_length == 0) {
        PyErr_SetString(PyExc_ValueError, "empty marker");
        return NULL;
    }
    if (parse_program(program, ops, &n_ops, &n_slots) < 0)
        return NULL;
    if (parse_histograms(specs, hists, &n_hists, n_slots) < 0)
        return NULL;

    double slots[MAX_SLOTS] = {0};
    const char *end = chunk + chunk_length;
    const char *p = chunk;
    Py_ssize_t matched = 0;
    int failed = 0;
    while (p < end) {
        const char *at = memmem(p, (size_t)(end - p), marker, (size_t)marker_length);
        if (at == NULL)
            break;
        if (behind_length + guard_length > 0 &&
            !preceded_by(chunk, at, guard, guard_length, behind, behind_length)) {
            failed = 1;
            break;
        }
        const char *line_end = match_line(ops, n_ops, at + marker_length, end, slots);
        if (line_end == NULL) {
            failed = 1;
            break;
        }
        for (int i = 0; i < n_hists; i++) {
            int status = histogram_add(&hists[i], slots);
            if (status < 0) {
                failed = status;
                break;
            }
        }
        if (failed)
            break;
        matched++;
        p = line_end;
    }

    PyObject *result = NULL;
    if (failed == -2) {
        PyErr_NoMemory();
    } else if (failed) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *list = PyList_New(n_hists);
        if (list != NULL) {
            int ok = 1;
            for (int i = 0; i < n_hists; i++) {
                PyObject *h = histogram_result(&hists[i]);
                if (h == NULL) {
                    ok = 0;
                    break;
                }
                PyList_SetItem(list, i, h);
            }
            if (ok)
                result = Py_BuildValue("(nN)", matched, list);
            else
                Py_DECREF(list);
        }
    }
    histograms_free(hists, n_hists);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "specserve_exporter._scan",
    "Chunk scanner for the exporter's hot path (see _scan.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* shape.py checks its operation numbers against these: a stale build fails at import. */
    if (PyModule_AddIntConstant(m, "OP_LITERAL", OP_LITERAL) < 0 ||
        PyModule_AddIntConstant(m, "OP_INTEGER", OP_INTEGER) < 0 ||
        PyModule_AddIntConstant(m, "OP_DECIMAL", OP_DECIMAL) < 0 ||
        PyModule_AddIntConstant(m, "OP_BOOLEAN", OP_BOOLEAN) < 0 ||
        PyModule_AddIntConstant(m, "OP_TEXT", OP_TEXT) < 0 ||
        PyModule_AddIntConstant(m, "OP_COUNTER", OP_COUNTER) < 0 ||
        /* OP_BOOLEAN takes a slot (the decode lines' graph state, by batch size). */
        PyModule_AddIntConstant(m, "BOOLEAN_SLOTS", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
