"""The job commands' transactions, below the features that build on them: enqueue, the claim
and the lease-fenced writes, operators' writes, job types and the reaper's pass. Every feature makes
jobs (a schedule fires them, a source poll enqueues them, a workflow releases them), so this
folder sits under the feature namespaces and the facade (:mod:`ledger.api`) binds it."""
