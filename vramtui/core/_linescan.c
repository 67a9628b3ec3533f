/*
 * vramtui.core._linescan: the log diagnosis's line scanner, compiled.
 *
 * The diagnosis reads a log by the "digit mask" of each line (every ASCII digit read as '0'): lines
 * that differ only in their numbers share one analysis. In pure Python (diagnose.py's
 * _feed_raw_stream, the reference and the fallback) every line costs a bytes object for the line,
 * another for its mask and a dict look-up. Here a MaskTable keeps masks -> analyses in its own hash
 * table and walks a block of lines in C; a line whose analysis is in the caller's "quiet" set (it
 * changes nothing in the present state) costs no Python object at all. Python sees only the other
 * lines, as events.
 *
 * Nothing here knows the rules: an analysis ("entry") is any Python object, stored and handed back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t hash; /* 0: an empty slot */
    Py_ssize_t length;
    char *mask; /* the masked bytes, owned */
    PyObject *entry; /* a strong reference */
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *slots;
    Py_ssize_t capacity; /* a power of two, or 0 before the first add */
    Py_ssize_t count;
    Py_ssize_t limit; /* at this many masks the table starts over (bounded memory) */
    Py_ssize_t max_line; /* longer lines are never stored: the caller cuts them first */
    char *scratch;
    Py_ssize_t scratch_size;
    /* the block being scanned */
    PyObject *block; /* bytes, a strong reference */
    Py_ssize_t pos;
    Py_ssize_t end;
    Py_ssize_t number; /* the line number of the last line scanned */
} MaskTable;

static int
ensure_scratch(MaskTable *self, Py_ssize_t length)
{
    if (self->scratch != NULL && length <= self->scratch_size) {
        return 0; /* (allocated even for an empty line: memcmp is never handed NULL) */
    }
    Py_ssize_t size = self->scratch_size ? self->scratch_size : 256;
    while (size < length) {
        size *= 2;
    }
    char *grown = PyMem_Realloc(self->scratch, (size_t)size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->scratch = grown;
    self->scratch_size = size;
    return 0;
}

/* Mask the line into scratch (digits -> '0') and hash the mask; never 0. */
static uint64_t
mask_and_hash(MaskTable *self, const char *line, Py_ssize_t length)
{
    unsigned char *out = (unsigned char *)self->scratch;
    const unsigned char *in = (const unsigned char *)line;
    for (Py_ssize_t i = 0; i < length; i++) {
        unsigned char c = in[i];
        out[i] = (unsigned char)(c - '0') < 10 ? '0' : c;
    }
    uint64_t hash = 0x243F6A8885A308D3ULL ^ (uint64_t)length;
    Py_ssize_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t word;
        memcpy(&word, out + i, 8);
        hash = (hash ^ word) * 0x9E3779B97F4A7C15ULL;
        hash ^= hash >> 29;
    }
    if (i < length) {
        uint64_t word = 0;
        memcpy(&word, out + i, (size_t)(length - i));
        hash = (hash ^ word) * 0x9E3779B97F4A7C15ULL;
        hash ^= hash >> 29;
    }
    hash *= 0xBF58476D1CE4E5B9ULL;
    hash ^= hash >> 31;
    return hash ? hash : 1;
}

/* The slot holding this mask (in scratch), or the empty slot where it would go. */
static Slot *
find_slot(MaskTable *self, uint64_t hash, Py_ssize_t length)
{
    size_t wrap = (size_t)self->capacity - 1;
    size_t index = (size_t)hash & wrap;
    for (;;) {
        Slot *slot = &self->slots[index];
        if (slot->hash == 0) {
            return slot;
        }
        if (slot->hash == hash && slot->length == length && memcmp(slot->mask, self->scratch, (size_t)length) == 0) {
            return slot;
        }
        index = (index + 1) & wrap;
    }
}

/* The entry stored for this line's mask (borrowed), or NULL. */
static PyObject *
lookup(MaskTable *self, const char *line, Py_ssize_t length)
{
    if (self->count == 0) {
        return NULL;
    }
    uint64_t hash = mask_and_hash(self, line, length);
    return find_slot(self, hash, length)->entry;
}

static void
clear_slots(MaskTable *self)
{
    for (Py_ssize_t i = 0; i < self->capacity; i++) {
        Slot *slot = &self->slots[i];
        if (slot->hash != 0) {
            PyMem_Free(slot->mask);
            Py_CLEAR(slot->entry);
            slot->hash = 0;
        }
    }
    self->count = 0;
}

static int
grow(MaskTable *self)
{
    Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 1024;
    Slot *slots = PyMem_Calloc((size_t)capacity, sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t wrap = (size_t)capacity - 1;
    for (Py_ssize_t i = 0; i < self->capacity; i++) {
        Slot *old = &self->slots[i];
        if (old->hash == 0) {
            continue;
        }
        size_t index = (size_t)old->hash & wrap;
        while (slots[index].hash != 0) {
            index = (index + 1) & wrap;
        }
        slots[index] = *old;
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->capacity = capacity;
    return 0;
}

static int
MaskTable_init(MaskTable *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"limit", "max_line", NULL};
    Py_ssize_t limit, max_line;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nn", keywords, &limit, &max_line)) {
        return -1;
    }
    if (limit < 1 || max_line < 0) {
        PyErr_SetString(PyExc_ValueError, "limit must be positive and max_line not negative");
        return -1;
    }
    self->limit = limit;
    self->max_line = max_line;
    return 0;
}

static void
MaskTable_dealloc(MaskTable *self)
{
    clear_slots(self);
    PyMem_Free(self->slots);
    PyMem_Free(self->scratch);
    Py_CLEAR(self->block);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
MaskTable_start(MaskTable *self, PyObject *args)
{
    PyObject *block;
    Py_ssize_t pos, end, number;
    if (!PyArg_ParseTuple(args, "O!nnn", &PyBytes_Type, &block, &pos, &end, &number)) {
        return NULL;
    }
    if (pos < 0 || end < pos || end > PyBytes_GET_SIZE(block)) {
        PyErr_SetString(PyExc_ValueError, "pos and end must lie within the block");
        return NULL;
    }
    Py_INCREF(block);
    Py_XSETREF(self->block, block);
    self->pos = pos;
    self->end = end;
    self->number = number;
    Py_RETURN_NONE;
}

static PyObject *
event(Py_ssize_t number, const char *line, Py_ssize_t length, PyObject *entry)
{
    PyObject *tuple = PyTuple_New(3);
    if (tuple == NULL) {
        return NULL;
    }
    PyObject *index = PyLong_FromSsize_t(number);
    PyObject *raw = PyBytes_FromStringAndSize(line, length);
    if (index == NULL || raw == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(raw);
        Py_DECREF(tuple);
        return NULL;
    }
    PyTuple_SET_ITEM(tuple, 0, index);
    PyTuple_SET_ITEM(tuple, 1, raw);
    PyTuple_SET_ITEM(tuple, 2, Py_NewRef(entry ? entry : Py_None));
    return tuple;
}

/* The next line of the block whose entry is not in `quiet`, as (number, line, entry or None); None
 * when the block is done. Lines over max_line always come back (with None): the caller cuts them. */
static PyObject *
MaskTable_scan(MaskTable *self, PyObject *quiet)
{
    if (!PyAnySet_Check(quiet)) {
        PyErr_SetString(PyExc_TypeError, "quiet must be a set");
        return NULL;
    }
    if (self->block == NULL) {
        Py_RETURN_NONE;
    }
    const char *base = PyBytes_AS_STRING(self->block);
    Py_ssize_t pos = self->pos;
    Py_ssize_t end = self->end;
    int any_quiet = PySet_GET_SIZE(quiet) > 0;
    while (pos < end) {
        const char *line = base + pos;
        const char *newline = memchr(line, '\n', (size_t)(end - pos));
        Py_ssize_t length = newline ? newline - line : end - pos;
        pos += length + 1;
        self->number++;
        PyObject *entry = NULL;
        if (length <= self->max_line) {
            if (ensure_scratch(self, length) < 0) {
                self->pos = pos;
                return NULL;
            }
            entry = lookup(self, line, length);
            if (entry != NULL && any_quiet) {
                int known = PySet_Contains(quiet, entry);
                if (known < 0) {
                    self->pos = pos;
                    return NULL;
                }
                if (known) {
                    continue;
                }
            }
        }
        self->pos = pos;
        return event(self->number, line, length, entry);
    }
    self->pos = pos;
    Py_CLEAR(self->block);
    Py_RETURN_NONE;
}

/* Store `entry` for the mask of `line` (bytes, at most max_line long). */
static PyObject *
MaskTable_add(MaskTable *self, PyObject *args)
{
    Py_buffer line;
    PyObject *entry;
    if (!PyArg_ParseTuple(args, "y*O", &line, &entry)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (line.len > self->max_line) {
        PyErr_SetString(PyExc_ValueError, "line longer than max_line");
        goto done;
    }
    if (self->count >= self->limit) {
        clear_slots(self); /* as the pure-Python memo does: start over, memory stays bounded */
    }
    if ((self->count + 1) * 2 > self->capacity && grow(self) < 0) {
        goto done;
    }
    if (ensure_scratch(self, line.len) < 0) {
        goto done;
    }
    uint64_t hash = mask_and_hash(self, line.buf, line.len);
    Slot *slot = find_slot(self, hash, line.len);
    if (slot->hash == 0) {
        char *mask = PyMem_Malloc(line.len ? (size_t)line.len : 1);
        if (mask == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(mask, self->scratch, (size_t)line.len);
        slot->hash = hash;
        slot->length = line.len;
        slot->mask = mask;
        self->count++;
    }
    Py_INCREF(entry);
    Py_XSETREF(slot->entry, entry);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&line);
    return result;
}

/* The entry stored for the mask of `line`, or None. */
static PyObject *
MaskTable_get(MaskTable *self, PyObject *arg)
{
    Py_buffer line;
    if (PyObject_GetBuffer(arg, &line, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *entry = NULL;
    if (line.len <= self->max_line && ensure_scratch(self, line.len) == 0) {
        entry = lookup(self, line.buf, line.len);
    }
    PyBuffer_Release(&line);
    if (PyErr_Occurred()) {
        return NULL;
    }
    return Py_NewRef(entry ? entry : Py_None);
}

static PyObject *
MaskTable_clear(MaskTable *self, PyObject *Py_UNUSED(ignored))
{
    clear_slots(self);
    Py_RETURN_NONE;
}

static Py_ssize_t
MaskTable_len(MaskTable *self)
{
    return self->count;
}

static PyObject *
MaskTable_get_number(MaskTable *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->number);
}

static PyMethodDef MaskTable_methods[] = {
    {"start", (PyCFunction)MaskTable_start, METH_VARARGS,
     "start(block, pos, end, number): scan block[pos:end] (whole lines) next; number is the line before."},
    {"scan", (PyCFunction)MaskTable_scan, METH_O,
     "scan(quiet) -> (number, line, entry or None) | None: the next line whose entry is not in quiet."},
    {"add", (PyCFunction)MaskTable_add, METH_VARARGS, "add(line, entry): store entry for the line's digit mask."},
    {"get", (PyCFunction)MaskTable_get, METH_O, "get(line) -> the entry for the line's digit mask, or None."},
    {"clear", (PyCFunction)MaskTable_clear, METH_NOARGS, "Forget every mask."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MaskTable_getset[] = {
    {"number", (getter)MaskTable_get_number, NULL, "The line number of the last line scanned.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods MaskTable_as_sequence = {
    .sq_length = (lenfunc)MaskTable_len,
};

static PyTypeObject MaskTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "vramtui.core._linescan.MaskTable",
    .tp_doc = "Lines by their digit mask -> an entry; scans blocks of lines, skipping quiet entries.",
    .tp_basicsize = sizeof(MaskTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)MaskTable_init,
    .tp_dealloc = (destructor)MaskTable_dealloc,
    .tp_methods = MaskTable_methods,
    .tp_getset = MaskTable_getset,
    .tp_as_sequence = &MaskTable_as_sequence,
};

static struct PyModuleDef linescan_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "vramtui.core._linescan",
    .m_doc = "The log diagnosis's line scanner, compiled (see diagnose.py for the pure-Python reference).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__linescan(void)
{
    if (PyType_Ready(&MaskTableType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&linescan_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&MaskTableType);
    if (PyModule_AddObject(module, "MaskTable", (PyObject *)&MaskTableType) < 0) {
        Py_DECREF(&MaskTableType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
