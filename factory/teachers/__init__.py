"""Teachers: the backends a generate run asks (embedded llama.cpp, OpenAI-compatible, vLLM), behind one small
interface. Heavy imports happen inside each backend.

- ``base``: The teacher interface: requests in, results out, every attempt accounted for.
- ``embedded``: Models that ship inside PyPI wheels, so nothing is downloaded from a model hub at run time.
- ``llama_cpp``: The embedded teacher: llama.cpp in-process (llama-cpp-python), schema-constrained and seeded.
- ``openai_compat``: A teacher behind any OpenAI-compatible chat-completions server: vLLM `serve`, llama.cpp's ...
- ``vllm_offline``: The vLLM offline teacher: `vllm.LLM` in-process on a GPU node (optional `gpu` extra).
"""

from __future__ import annotations

from mashbill.factory.teachers.base import Teacher, TeacherRequest, TeacherResult


def make_teacher(teacher_spec, *, threads: int | None = None, **kwargs) -> Teacher:
    backend = teacher_spec.backend
    if backend == "llama_cpp":
        from mashbill.factory.teachers.llama_cpp import LlamaCppTeacher

        return LlamaCppTeacher(teacher_spec, threads=threads, **kwargs)
    if backend == "openai":
        from mashbill.factory.teachers.openai_compat import OpenAITeacher

        return OpenAITeacher(teacher_spec, **kwargs)
    if backend == "vllm":
        from mashbill.factory.teachers.vllm_offline import VLLMTeacher

        return VLLMTeacher(teacher_spec, **kwargs)
    raise ValueError(f"unknown teacher backend {backend!r}")


__all__ = ["Teacher", "TeacherRequest", "TeacherResult", "make_teacher"]
