# Cython declarations for metrics.py (pure-Python mode: the .py runs as it is where not compiled):
# the end-of-episode pass reads each job record's fields as C fields.
cimport cython
from gpu_sharing_env.sim.state cimport JobLedger, JobState

@cython.locals(j=JobState, led=JobLedger, n_submitted=Py_ssize_t, n_done=Py_ssize_t,
               n_failed=Py_ssize_t, n_running=Py_ssize_t, n_queued=Py_ssize_t,
               n_offline=Py_ssize_t, n_done_offline=Py_ssize_t, first_submit=double,
               last_finish=double, submit=double)
cpdef dict compute_metrics(jobs, acc, n_gpus, now_s)

