"""hlo.passes: the global passes and the per-target pipeline.

Entry points: ``hlo.passes.pipeline.optimize(module, target, dump_dir, options) -> Optimized``,
``hlo.passes.analysis.cost_analysis`` / ``memory_analysis``, the pass registry
(``hlo.passes.base``), and ``python -m hlo.opt`` for running passes on IR text.

Conventions of the optimized module (what backends compile, in ``Optimized.module.main``):

- The top-level ops of ``main`` are in schedule order (``Optimized.schedule``). Each is one of:
  a kernel: a ``fusion`` op (attribute ``kind`` loop/input/output/multi, ``name``; see
  ``fusion_kinds`` for what each kind may contain and how it is run), an unfused ``dot_general``,
  or an opaque op (gather, scatter, sort, while, ...); or a free op that launches nothing:
  ``constant`` (an entry of the constants table) and bitcasts (``layout.is_bitcast``: a
  reshape, transpose, broadcast or bitcast_convert whose result is its operand's bytes).
- Every top-level tensor of rank >= 1 has a layout (minor-to-major) in its type; kernels read
  and write top-level values in those layouts. Parameters and results of main are row-major.
  Values inside fused regions have no layout and no buffer: they live in registers.
- Fused regions read only their parameters.
- ``Optimized.buffers`` (``buffer_assignment.BufferAssignment``) gives every top-level value a
  ``Slice(kind, index, offset, size)``: param / output / temp (arena offset) / constant. A kernel
  whose result shares its operand's slice (``BufferAssignment.inplace``) must read each element
  before writing the same element (in an input fusion: finish a row's reductions before
  writing the row); ``fusion_kinds.inplace_pairs`` states when that is possible.
- ``output_copies`` lists outputs the runtime copies into their result buffer after the run;
  ``aliases`` maps outputs to the donated arguments they were written into.
"""
