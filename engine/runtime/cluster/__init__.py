"""Cluster mode: the control plane on Thespian actors (Dispatcher, JobMaster, ResourceManager,
TaskExecutors, one StreamTask actor per task in its own process) and the client that submits
jobs to it. The data plane between tasks is :mod:`rill.network.netty`."""
