# The compiled JobState (gpu_sharing_env/_compile.py): an extension type whose float fields are
# C doubles, read by the components' typed loops (``cython.locals(st=JobState)``); its two
# sub-records are extension types too, typed fields of it (``st.serving.duty`` is two pointer
# reads). The fields and their meaning are state.py's; keep the two in step
# (tests/test_compiled.py checks it).

cdef class ServingState:
    cdef public double duty
    cdef public double rps
    cdef public double noise_z
    cdef public double outage_until
    cdef public double latency_ms
    cdef public double p99_ms
    cdef public double solo_batch_ms
    cdef public double wait_ms
    cdef public double tail_ms
    cdef public double alone_frac
    cdef public object batch_size

cdef class JobLedger:
    cdef public double first_start_t
    cdef public double finish_t
    cdef public double enqueue_t
    cdef public object attempts
    cdef public object evictions
    cdef public double norm_integral
    cdef public double run_time_s

cdef class JobState:
    cdef public object spec
    cdef public object status
    cdef public list gpus
    cdef public object option
    cdef public list mig
    cdef public double work_done
    cdef public double rate
    cdef public double solo_rate
    cdef public dict frac
    cdef public double sm_eff
    cdef public double throttle
    cdef public double last_t
    cdef public double setup_until
    cdef public object epoch
    cdef public object run_id
    cdef public double run_start_t
    cdef public double run_work_start
    cdef public object online
    cdef public ServingState serving
    cdef public JobLedger ledger

# (the fields of a new record, and ``JobState(spec)`` without the constructors' calls: state.py)
cdef object _FUTURE
cdef object _ONLINE
cdef double _NAN
cdef object _fresh_serving(ServingState s)
cdef object _fresh_ledger(JobLedger led)
cdef object _fresh_record(JobState st, object spec)
cpdef JobState new_record(object spec)
