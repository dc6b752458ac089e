"""The tests' own governance hook: a real `capgate.v1.Hook` server (capgate_client.hook) whose
answers the test chooses by correlation id, recording every call it receives."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from capgate_client.hook import (
    HookCall,
    PostFailure,
    PostInvoke,
    PostInvokeResult,
    PreInvoke,
    PreInvokeResult,
)


@dataclass
class Received:
    rpc: str
    hook: str
    call: HookCall
    payload: Any  # input, output, or (code, stage, state)


@dataclass
class Script:
    """`pre[correlation_id]` / `post[correlation_id]`: the answer (or a callable making it);
    `on_resume[approval_id]`: the pre answer when the call resumes that approval."""

    pre: dict[str, Any] = field(default_factory=dict)
    post: dict[str, Any] = field(default_factory=dict)
    on_resume: dict[str, Any] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def calls(self, rpc: str | None = None, *, execution_id: str = "") -> list[Received]:
        return [
            r
            for r in self.received
            if (rpc is None or r.rpc == rpc)
            and (not execution_id or r.call.execution_id == execution_id)
        ]

    async def _answer(self, chosen: Any, request: Any, default: Any) -> Any:
        if chosen is None:
            return default
        if chosen == "slow":
            await asyncio.sleep(30)
        if chosen == "raise":
            raise RuntimeError("the hook crashed")
        return chosen(request) if callable(chosen) else chosen

    async def pre_invoke(self, request: PreInvoke) -> PreInvokeResult:
        self.received.append(Received("pre", request.call.hook, request.call, request.input))
        if request.call.approval_id:
            chosen = self.on_resume.get(request.call.approval_id)
        else:
            chosen = self.pre.get(request.call.correlation_id)
        result: PreInvokeResult = await self._answer(chosen, request, PreInvokeResult())
        return result

    async def post_invoke(self, request: PostInvoke) -> PostInvokeResult:
        self.received.append(Received("post", request.call.hook, request.call, request.output))
        chosen = self.post.get(request.call.correlation_id)
        result: PostInvokeResult = await self._answer(chosen, request, PostInvokeResult())
        return result

    async def post_failure(self, request: PostFailure) -> None:
        payload = (request.code, request.stage, request.execution_state)
        self.received.append(Received("failure", request.call.hook, request.call, payload))
