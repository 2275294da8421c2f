# CPython's slot (member descriptor) access, for job.py compiled (``cimport`` only: no module).
# A ``__slots__`` field's descriptor is a PyMemberDescrObject; its d_member says where the
# field lies in the object. PyMember_GetOne/SetOne are what the descriptor's __get__/__set__
# call once they have checked the object's type.
cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    int T_OBJECT_EX
    int READONLY
    object PyMember_GetOne(const char *obj_addr, PyMemberDef *m)
    int PyMember_SetOne(char *obj_addr, PyMemberDef *m, object v) except -1

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    ctypedef struct PyObject
    void Py_INCREF(PyObject *o)
    void Py_XDECREF(PyObject *o)


cdef extern from "Python.h":
    # (macros: the object's type; the type a descriptor belongs to)
    void *_type_of "Py_TYPE"(object o)
    void *_descr_type "PyDescr_TYPE"(object d)


cdef inline object slot_get_checked(object obj, object slot):
    """``slot.__get__(obj)`` where ``obj``'s type is exactly the one ``slot`` belongs to (its
    member read in C: two pointers compared, then ``PyMember_GetOne``); any other object (a
    subclass, a stand-in with the same attribute names) by ``getattr`` of the slot's name."""
    if _type_of(obj) == _descr_type(slot):
        return PyMember_GetOne(<char *><void *>obj, (<PyMemberDescrObject *><void *>slot).d_member)
    return getattr(obj, slot.__name__)


cdef inline object slot_get(object obj, object slot):
    """``slot.__get__(obj)`` for a slot descriptor of ``obj``'s type."""
    return PyMember_GetOne(<char *><void *>obj, (<PyMemberDescrObject *><void *>slot).d_member)


cdef inline int slot_set(object obj, object slot, object value) except -1:
    """``slot.__set__(obj, value)`` for a slot descriptor of ``obj``'s type: an object field
    (``T_OBJECT_EX``, writable: every ``__slots__`` field) is the pointer itself, its reference
    counted, as ``PyMember_SetOne`` writes it (``slot_copy``); any other member through it."""
    cdef PyMemberDef *m = (<PyMemberDescrObject *><void *>slot).d_member
    cdef PyObject *old
    cdef PyObject **at
    if m.type == T_OBJECT_EX and not (m.flags & READONLY):
        at = <PyObject **>(<char *><void *>obj + m.offset)
        old = at[0]
        Py_INCREF(<PyObject *>value)  # (before the release: ``value`` may be the one it replaces)
        at[0] = <PyObject *>value
        Py_XDECREF(old)
        return 0
    return PyMember_SetOne(<char *><void *>obj, m, value)


cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        pass
    # (CPython's own typedef: ``tp_alloc``'s type; the result a new reference)
    ctypedef object (*allocfunc)(PyTypeObject *t, Py_ssize_t n)

cdef extern from *:
    """
    #define __gsg_tp_alloc_of(t) (((PyTypeObject *)(t))->tp_alloc)
    """
    allocfunc _tp_alloc_of "__gsg_tp_alloc_of"(object t)


cdef inline object plain_new(object cls):
    """``object.__new__(cls)`` for a class with no ``__new__`` of its own (a slotted dataclass):
    ``object_new``'s allocation (``cls``'s ``tp_alloc``, no items) without the method call."""
    return _tp_alloc_of(cls)(<PyTypeObject *><void *>cls, 0)


cdef inline int slot_copy(object dst, object src, object slot) except -1:
    """``slot.__set__(dst, slot.__get__(src))`` for a slot descriptor of both objects' type:
    an object field (``T_OBJECT_EX``, writable: every ``__slots__`` field) is the pointer
    itself, its reference counted, as ``PyMember_GetOne``/``SetOne`` do it; any other member,
    or a field not set in ``src`` (``AttributeError``), through them."""
    cdef PyMemberDef *m = (<PyMemberDescrObject *><void *>slot).d_member
    cdef PyObject *v
    cdef PyObject *old
    cdef PyObject **at
    if m.type == T_OBJECT_EX and not (m.flags & READONLY):
        v = (<PyObject **>(<char *><void *>src + m.offset))[0]
        if v is not NULL:
            at = <PyObject **>(<char *><void *>dst + m.offset)
            old = at[0]
            Py_INCREF(v)  # (before the release: ``v`` may be the one it replaces)
            at[0] = v
            Py_XDECREF(old)  # (once the field holds ``v``, as ``PyMember_SetOne`` orders it)
            return 0
    return PyMember_SetOne(<char *><void *>dst, m, PyMember_GetOne(<char *><void *>src, m))
