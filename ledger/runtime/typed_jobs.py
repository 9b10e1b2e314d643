"""Typed jobs: a job type declared once, in code, with its payload type, output type and
definition options, and enqueued through the declaration.

``@registry.job("card.charge", max_attempts=5)`` on a handler whose second parameter is a
:class:`msgspec.Struct` gives a :class:`TypedJob`; on a handler that takes keyword parameters
instead (``def f(ctx, *, amount: int, currency: str = "EUR")``) a :class:`KeywordJob`, whose
parameters msgspec validates as a struct made from the signature. Either way:

- **at enqueue** the payload is validated and encoded by msgspec *before anything is
  written*: a payload msgspec rejects is an :class:`~ledger.core.errors.InvalidRequestError`
  (``request.invalid``) carrying msgspec's message;
- **the handler** receives the decoded type (a stored payload that no longer decodes — a type
  changed under pending jobs — fails the attempt with a :class:`PermanentError`, code
  ``job.payload_invalid``: retrying cannot fix it);
- **the output** the handler returns is encoded with :func:`msgspec.to_builtins`, and
  :meth:`Enqueued.output <ledger.api.job_handle.Enqueued.output>` decodes it back to the
  handler's declared return type.

The definition options on the decorator are the job type's definition, under one rule with
the worker's (:mod:`ledger.runtime.definitions`): **the stored definition wins**. The first
enqueue through a declaration on a ledger defines the type from the declaration if it is not
yet defined (so a producer need not call ``ledger.define`` nor wait for a worker, and an
``auto_define`` ledger does not define it with the bare defaults instead); a pool of the
registry does the same at start. A type already defined is left as it is — a worker logs where
the declaration differs, and applies it only with ``--apply-definitions``.
"""

from __future__ import annotations

import functools
import inspect
import typing
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypedDict, TypeVar, Unpack

import msgspec

from ledger.api.job_handle import Enqueued, handles_of
from ledger.core.errors import DefinitionNotFoundError, InvalidRequestError
from ledger.core.values import JSON, EnqueueRequest, Subject
from ledger.runtime.handler_spec import HandlerSpec, define_from_handler
from ledger.runtime.job_context import JobContext, PermanentError, Result, SyncJobContext

if TYPE_CHECKING:
    from ledger.api.async_ledger import AsyncLedger
    from ledger.api.async_transactions import AsyncTransaction
    from ledger.api.ledger import Ledger

PayloadT = TypeVar("PayloadT", bound=msgspec.Struct)
OutputT = TypeVar("OutputT")
P = ParamSpec("P")

PAYLOAD_INVALID_CODE = "job.payload_invalid"


class EnqueueOptions(TypedDict, total=False):
    """What an enqueue may say besides the payload (as :meth:`Ledger.enqueue
    <ledger.api.ledger.Ledger.enqueue>` takes them)."""

    priority: int | None
    run_at: datetime | None
    delay_s: float | None
    max_attempts: int | None
    timeout_s: float | None
    org: str | None
    queue: str | None
    idempotency_key: str | None
    subject: Subject | None
    actor: str | None


class _Declared:
    """What both kinds of typed job share: the type, its handler's spec, the payload struct,
    the output type, and the enqueue path."""

    def __init__(
        self,
        spec: HandlerSpec,
        function: Callable[..., Any],
        payload_type: type[msgspec.Struct],
        output_type: Any,
    ) -> None:
        self.job_type = spec.job_type
        self.spec = spec
        """The registered handler (the wrapper the pool runs) and its definition options."""
        self.function = function
        """The handler as written (call it directly in a unit test)."""
        self.payload_type = payload_type
        self.output_type = output_type
        """What :meth:`Enqueued.output` decodes to (``None``: the stored JSON as it is)."""
        self._defined_on: weakref.WeakSet[Ledger] = weakref.WeakSet()

    def _encode(self, payload: object) -> dict[str, JSON]:
        """The payload as the stored JSON object, validated against the payload type."""
        try:
            encoded = msgspec.to_builtins(payload)
            msgspec.convert(encoded, self.payload_type)
        except (msgspec.ValidationError, TypeError) as error:
            raise InvalidRequestError(
                f"payload of {self.job_type!r} is not a {self.payload_type.__name__}: {error}"
            ) from error
        return encoded  # type: ignore[no-any-return]  # a Struct encodes to a dict

    def _request(self, payload: dict[str, JSON], options: Mapping[str, Any]) -> EnqueueRequest:
        return self._requests([payload], options)[0]

    def _requests(
        self, payloads: list[dict[str, JSON]], options: Mapping[str, Any]
    ) -> list[EnqueueRequest]:
        fields = {name: value for name, value in options.items() if name != "actor"}
        if not fields:  # the common case, without a keyword call per request
            return [EnqueueRequest(self.job_type, payload) for payload in payloads]
        return [EnqueueRequest(job_type=self.job_type, payload=p, **fields) for p in payloads]

    def _enqueue(
        self, ledger: Ledger, payloads: list[dict[str, JSON]], options: Mapping[str, Any]
    ) -> list[Enqueued[Any]]:
        requests = self._requests(payloads, options)
        actor = options.get("actor")
        if ledger not in self._defined_on:
            define_from_handler(ledger, self.spec)
            self._defined_on.add(ledger)
        try:
            plan = ledger.enqueue_outcomes(requests, actor=actor)
        except DefinitionNotFoundError:
            # Undefined since (a ledger reset under a long-lived process): define once more.
            if ledger.definition(self.job_type) is not None:
                raise  # defined but disabled: the operator's say
            define_from_handler(ledger, self.spec)
            plan = ledger.enqueue_outcomes(requests, actor=actor)
        return handles_of(ledger, plan, self.output_type)

    async def _enqueue_async(
        self,
        ledger: AsyncLedger | AsyncTransaction,
        payloads: list[dict[str, JSON]],
        options: Mapping[str, Any],
    ) -> list[Enqueued[Any]]:
        # The payloads were validated and encoded in the loop already (a wrong type raises
        # before a thread is used); the enqueue is the sync one, in the async ledger's threads.
        call = functools.partial(self._enqueue, ledger.ledger, payloads, options)
        return await ledger.run(call)


class TypedJob(_Declared, Generic[PayloadT, OutputT]):
    """A job type whose payload is a :class:`msgspec.Struct` (see the module docstring)."""

    def request(self, payload: PayloadT, **options: Unpack[EnqueueOptions]) -> EnqueueRequest:
        """The validated request, for a batch mixed with other types
        (:meth:`Ledger.enqueue_many <ledger.api.ledger.Ledger.enqueue_many>`)."""
        return self._request(self._encode(payload), options)

    def enqueue(
        self, ledger: Ledger, payload: PayloadT, **options: Unpack[EnqueueOptions]
    ) -> Enqueued[OutputT]:
        """Enqueue one job; the answer is what :meth:`Ledger.enqueue
        <ledger.api.ledger.Ledger.enqueue>` answers, whose :meth:`~Enqueued.output` is
        decoded to this job's output type."""
        return self._enqueue(ledger, [self._encode(payload)], options)[0]

    def enqueue_many(
        self, ledger: Ledger, payloads: Iterable[PayloadT], **options: Unpack[EnqueueOptions]
    ) -> list[Enqueued[OutputT]]:
        """Enqueue one job per payload in one transaction (all or none), each with
        ``options``; every payload is validated before anything is written."""
        return self._enqueue(ledger, [self._encode(p) for p in payloads], options)

    async def enqueue_async(
        self,
        ledger: AsyncLedger | AsyncTransaction,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued[OutputT]:
        """:meth:`enqueue` for asyncio code: through an
        :class:`~ledger.api.async_ledger.AsyncLedger`, or the application's transaction that
        :meth:`AsyncLedger.using <ledger.api.async_ledger.AsyncLedger.using>` joins; the
        loop is never blocked."""
        return (await self._enqueue_async(ledger, [self._encode(payload)], options))[0]

    async def enqueue_many_async(
        self,
        ledger: AsyncLedger | AsyncTransaction,
        payloads: Iterable[PayloadT],
        **options: Unpack[EnqueueOptions],
    ) -> list[Enqueued[OutputT]]:
        """:meth:`enqueue_many` for asyncio code (see :meth:`enqueue_async`)."""
        return await self._enqueue_async(ledger, [self._encode(p) for p in payloads], options)


class KeywordJob(_Declared, Generic[P, OutputT]):
    """A job type whose payload is its handler's keyword parameters: ``job.enqueue(ledger,
    amount=5)``; options other than the payload through :meth:`with_options`."""

    def __init__(
        self,
        spec: HandlerSpec,
        function: Callable[..., Any],
        payload_type: type[msgspec.Struct],
        output_type: Any,
        *,
        signature: inspect.Signature,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(spec, function, payload_type, output_type)
        self._signature = signature
        self._options: Mapping[str, Any] = options or {}

    def with_options(self, **options: Unpack[EnqueueOptions]) -> KeywordJob[P, OutputT]:
        """This job with enqueue options set (``run_at``, ``idempotency_key``…) for the
        enqueues made through the copy."""
        copy: KeywordJob[P, OutputT] = KeywordJob(
            self.spec,
            self.function,
            self.payload_type,
            self.output_type,
            signature=self._signature,
            options={**self._options, **options},
        )
        copy._defined_on = self._defined_on
        return copy

    def payload(self, *args: P.args, **kwargs: P.kwargs) -> msgspec.Struct:
        """The handler's parameters as its payload struct, validated (for
        :meth:`enqueue_many`)."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            # A dict passed as the payload (the plain API's habit) is "too many positional
            # arguments" to bind: say how this job takes its payload.
            spelled = ", ".join(f"{name}=..." for name in self._signature.parameters)
            raise InvalidRequestError(
                f"payload of {self.job_type!r}: {error} (its payload is the handler's "
                f"parameters, passed as keywords: enqueue(ledger, {spelled}))"
            ) from error
        try:
            return msgspec.convert(bound.arguments, self.payload_type)
        except msgspec.ValidationError as error:
            raise InvalidRequestError(f"payload of {self.job_type!r}: {error}") from error

    def enqueue(self, ledger: Ledger, *args: P.args, **kwargs: P.kwargs) -> Enqueued[OutputT]:
        """Enqueue one job with these parameters (and :meth:`with_options`' options)."""
        payload = self._encode(self.payload(*args, **kwargs))
        return self._enqueue(ledger, [payload], self._options)[0]

    def enqueue_many(
        self, ledger: Ledger, payloads: Iterable[msgspec.Struct | Mapping[str, Any]]
    ) -> list[Enqueued[OutputT]]:
        """Enqueue one job per payload (a :meth:`payload` or a mapping of the parameters) in
        one transaction, all or none."""
        return self._enqueue(ledger, [self._encode(p) for p in payloads], self._options)

    async def enqueue_async(
        self, ledger: AsyncLedger | AsyncTransaction, *args: P.args, **kwargs: P.kwargs
    ) -> Enqueued[OutputT]:
        """:meth:`enqueue` for asyncio code: through an
        :class:`~ledger.api.async_ledger.AsyncLedger`, or the application's transaction that
        :meth:`AsyncLedger.using <ledger.api.async_ledger.AsyncLedger.using>` joins; the
        loop is never blocked."""
        payload = self._encode(self.payload(*args, **kwargs))
        return (await self._enqueue_async(ledger, [payload], self._options))[0]

    async def enqueue_many_async(
        self,
        ledger: AsyncLedger | AsyncTransaction,
        payloads: Iterable[msgspec.Struct | Mapping[str, Any]],
    ) -> list[Enqueued[OutputT]]:
        """:meth:`enqueue_many` for asyncio code (see :meth:`enqueue_async`)."""
        encoded = [self._encode(p) for p in payloads]
        return await self._enqueue_async(ledger, encoded, self._options)


def declare(
    job_type: str, function: Callable[..., Any], register: Callable[[Any], HandlerSpec]
) -> TypedJob[Any, Any] | KeywordJob[Any, Any]:
    """Make the typed job of ``function``, registering its wrapped handler (what the pool
    runs: it decodes the payload, calls ``function``, encodes the output) with ``register``."""
    # A callable object is read through its __call__ (its hints and whether it is async).
    target = function if inspect.isroutine(function) else type(function).__call__
    hints = typing.get_type_hints(target)
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())[1:]  # the first is the context
    is_async = inspect.iscoroutinefunction(target)
    output_type = _output_type(hints.get("return", Any))
    struct = _struct_parameter(parameters, hints)
    if struct is not None:
        spec = register(_wrap(function, is_async, struct, as_keywords=False))
        return TypedJob(spec, function, struct, output_type)
    payload_type = _keyword_struct(job_type, parameters, hints)
    spec = register(_wrap(function, is_async, payload_type, as_keywords=True))
    return KeywordJob(
        spec,
        function,
        payload_type,
        output_type,
        signature=signature.replace(parameters=parameters),
    )


def _struct_parameter(
    parameters: list[inspect.Parameter], hints: Mapping[str, Any]
) -> type[msgspec.Struct] | None:
    """The payload struct of a ``(ctx, payload: SomeStruct)`` handler, else ``None``."""
    if len(parameters) != 1 or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        return None
    annotation = hints.get(parameters[0].name)
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        if annotation.__struct_config__.array_like:
            raise TypeError(f"{annotation.__name__}: a payload must encode to an object")
        return annotation
    return None


def _keyword_struct(
    job_type: str, parameters: list[inspect.Parameter], hints: Mapping[str, Any]
) -> type[msgspec.Struct]:
    """A struct with a field per keyword parameter (type from its annotation, ``Any``
    without; its default kept)."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for parameter in parameters:
        if parameter.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.POSITIONAL_ONLY,
        ):
            raise TypeError(
                f"handler of {job_type!r}: parameter {parameter.name!r} cannot be a payload "
                "field (use named parameters, or one msgspec.Struct parameter)"
            )
        annotation = hints.get(parameter.name, Any)
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, annotation))
        else:
            fields.append((parameter.name, annotation, parameter.default))
    return msgspec.defstruct(
        f"{job_type} payload", fields, kw_only=True, forbid_unknown_fields=True
    )


def _output_type(annotation: Any) -> Any:
    """What an output decodes to: ``None`` (as stored) for no annotation, ``Any``, JSON or
    :class:`Result`."""
    if annotation is Any or annotation is Result or annotation is type(None):
        return None
    return annotation


def _wrap(
    function: Callable[..., Any],
    is_async: bool,
    payload_type: type[msgspec.Struct],
    *,
    as_keywords: bool,
) -> Callable[..., Any]:
    """The handler the pool runs, async or sync as ``function`` is."""

    def arguments(ctx: JobContext | SyncJobContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        try:
            payload = msgspec.convert(ctx.payload, payload_type)
        except msgspec.ValidationError as error:
            raise PermanentError(
                f"stored payload is not a {payload_type.__name__}: {error}",
                code=PAYLOAD_INVALID_CODE,
            ) from error
        if as_keywords:
            return (ctx,), {name: getattr(payload, name) for name in payload.__struct_fields__}
        return (ctx, payload), {}

    if is_async:

        async def run_async(ctx: JobContext) -> Any:
            args, kwargs = arguments(ctx)
            returned: Awaitable[Any] = function(*args, **kwargs)
            return _encode_output(await returned)

        run_async.__qualname__ = getattr(function, "__qualname__", "handler")
        return run_async

    def run(ctx: SyncJobContext) -> Any:
        args, kwargs = arguments(ctx)
        return _encode_output(function(*args, **kwargs))

    run.__qualname__ = getattr(function, "__qualname__", "handler")
    return run


def _encode_output(returned: Any) -> Any:
    if returned is None:
        return None
    if isinstance(returned, Result):
        if returned.output is None:
            return returned
        return Result(
            msgspec.to_builtins(returned.output), returned.revision, returned.content_hash
        )
    return msgspec.to_builtins(returned)
