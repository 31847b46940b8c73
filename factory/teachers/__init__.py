"""Teacher backends behind one small interface. Heavy imports happen inside each backend."""

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
