"""The shared machinery every library integration is built on: catching a call where it happens
and handing it to the recording core.

- ``declaration``: what an integration declares (``Integration``, ``ClassMethod``), the one
  record the process-wide switch reads;
- ``installation``: what instrumenting one client changed, and how each change is taken back;
- ``patching``: a class method replaced by a wrapper that calls what it stands on as Python
  would (bound, inherited methods looked up at the call), beside other libraries' wrappers;
- ``sdk_calls``: one SDK method call recorded as one event per HTTP attempt (``SdkCall``,
  ``MethodSpec``, ``wrap_sync`` / ``wrap_async``);
- ``http_hooks``: the hooks on an SDK's own httpx client that report its attempts;
- ``http``: a vendor request seen in flight on any HTTP client, recorded
  (``send_recorded``, ``watch_for``);
- ``vendors``: which vendor endpoint a URL and body call (``recognise``);
- ``local``: calls of models that run in this process, with their tokenizer's count;
- ``imports``: a callback when a library is imported, without importing it;
- ``failures``: what a call raised, described as a categorised error (never its message).

Nothing here knows any particular library: ``spanledger.integrations`` holds one package per
library, and ``spanledger.instrumentation`` the switch and the public API on top of both.
"""
