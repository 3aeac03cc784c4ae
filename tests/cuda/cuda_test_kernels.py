"""Small GPU kernels for the runtime's tests, written as LLVM IR and compiled to PTX with
llvmlite's NVPTX target (sm_90). One thread per element; ``n`` is the element count."""
import llvmlite.binding as llvm

_HEAD = """
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
"""

_INDEX = """
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %d = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bd = mul i32 %b, %d
  %i = add i32 %bd, %t
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done
body:
"""


def _elementwise(name, params, body):
    return (f"define ptx_kernel void @{name}({params}, i32 %n) {{\nentry:{_INDEX}{body}"
            "  br label %done\ndone:\n  ret void\n}\n")


KERNELS = [
    # y = x + 1
    _elementwise("add_one", "ptr addrspace(1) %x, ptr addrspace(1) %y", """
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %v = load float, ptr addrspace(1) %px
  %w = fadd float %v, 1.0
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  store float %w, ptr addrspace(1) %py
"""),
    # y = x * a   (a: an f32 scalar parameter after n)
    ("define ptx_kernel void @scale(ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %n, float %a) {\n"
     "entry:" + _INDEX + """
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %v = load float, ptr addrspace(1) %px
  %w = fmul float %v, %a
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  store float %w, ptr addrspace(1) %py
  br label %done
done:
  ret void
}
"""),
    # z = x + y
    _elementwise("add", "ptr addrspace(1) %x, ptr addrspace(1) %y, ptr addrspace(1) %z", """
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  %u = load float, ptr addrspace(1) %px
  %v = load float, ptr addrspace(1) %py
  %w = fadd float %u, %v
  %pz = getelementptr float, ptr addrspace(1) %z, i32 %i
  store float %w, ptr addrspace(1) %pz
"""),
    # *p = 0 (one s32)
    """define ptx_kernel void @zero_i32(ptr addrspace(1) %p) {
  store i32 0, ptr addrspace(1) %p
  ret void
}
""",
    # *p += 1
    """define ptx_kernel void @inc_i32(ptr addrspace(1) %p) {
  %v = load i32, ptr addrspace(1) %p
  %w = add i32 %v, 1
  store i32 %w, ptr addrspace(1) %p
  ret void
}
""",
    # *pred = *p < *q  (pred: one byte)
    """define ptx_kernel void @lt_i32(ptr addrspace(1) %p, ptr addrspace(1) %q, ptr addrspace(1) %pred) {
  %a = load i32, ptr addrspace(1) %p
  %b = load i32, ptr addrspace(1) %q
  %c = icmp slt i32 %a, %b
  %z = zext i1 %c to i8
  store i8 %z, ptr addrspace(1) %pred
  ret void
}
""",
]

NAMES = ["add_one", "scale", "add", "zero_i32", "inc_i32", "lt_i32"]


def ptx() -> str:
    """The PTX of every test kernel (one module)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu="sm_90", opt=2)
    mod = llvm.parse_assembly(_HEAD + "\n".join(KERNELS))
    mod.verify()
    return tm.emit_assembly(mod)
