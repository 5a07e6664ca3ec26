from spanledger.chains import AttemptStatus as AttemptStatus
from spanledger.chains import BM25Step as BM25Step
from spanledger.chains import Breakers as Breakers
from spanledger.chains import CallableStep as CallableStep
from spanledger.chains import CancelToken as CancelToken
from spanledger.chains import CrossEncoderStep as CrossEncoderStep
from spanledger.chains import FallbackAttempt as FallbackAttempt
from spanledger.chains import GateCheck as GateCheck
from spanledger.chains import IdentityStep as IdentityStep
from spanledger.chains import ProviderStep as ProviderStep
from spanledger.chains import Reason as Reason
from spanledger.chains import RerankOutcome as RerankOutcome
from spanledger.chains import RerankStep as RerankStep
from spanledger.chains import StepRanking as StepRanking
from spanledger.chains import awith_fallback as awith_fallback
from spanledger.chains import spend_below as spend_below
from spanledger.chains import step as step
from spanledger.chains import when as when
from spanledger.chains import with_fallback as with_fallback

__all__ = [
    "AttemptStatus",
    "BM25Step",
    "Breakers",
    "CallableStep",
    "CancelToken",
    "CrossEncoderStep",
    "FallbackAttempt",
    "GateCheck",
    "IdentityStep",
    "ProviderStep",
    "Reason",
    "RerankOutcome",
    "RerankStep",
    "StepRanking",
    "awith_fallback",
    "spend_below",
    "step",
    "when",
    "with_fallback",
]
