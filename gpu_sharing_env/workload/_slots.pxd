# CPython's slot (member descriptor) access, for job.py compiled (``cimport`` only: no module).
# A ``__slots__`` field's descriptor is a PyMemberDescrObject; its d_member says where the
# field lies in the object. PyMember_GetOne/SetOne are what the descriptor's __get__/__set__
# call once they have checked the object's type.
cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        pass
    object PyMember_GetOne(const char *obj_addr, PyMemberDef *m)
    int PyMember_SetOne(char *obj_addr, PyMemberDef *m, object v) except -1

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member


cdef inline object slot_get(object obj, object slot):
    """``slot.__get__(obj)`` for a slot descriptor of ``obj``'s type."""
    return PyMember_GetOne(<char *><void *>obj, (<PyMemberDescrObject *><void *>slot).d_member)


cdef inline int slot_set(object obj, object slot, object value) except -1:
    """``slot.__set__(obj, value)`` for a slot descriptor of ``obj``'s type."""
    return PyMember_SetOne(<char *><void *>obj, (<PyMemberDescrObject *><void *>slot).d_member,
                           value)
