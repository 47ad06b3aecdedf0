"""Stage 3, classify: each distinct kernel name -> operation type, fused components, implementation, helper role.

In: a Trace from fusion.model (or kernel names). Out: the Trace with `type` and `type_route` per kernel and a
classified names table (`trace.classify_trace`). `names` applies the rules that `rulesets` compiles from
`rules.toml` and `op_rules.toml` (package data, validated by `rulefile`) and from a user's FUSION_RULES file.
`trace.load(source)` runs stages 1-3: the Trace every later stage takes.

May import: fusion.model, fusion.loader and the top-level modules.
"""
