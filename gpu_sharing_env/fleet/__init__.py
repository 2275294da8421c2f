"""Cluster state: the GPUs, what runs on each and in which mode (:mod:`.cluster`)."""
