from spanledger.chains.steps import BM25Step as BM25Step
from spanledger.chains.steps import CallableStep as CallableStep
from spanledger.chains.steps import CrossEncoderStep as CrossEncoderStep
from spanledger.chains.steps import Gate as Gate
from spanledger.chains.steps import GateCheck as GateCheck
from spanledger.chains.steps import IdentityStep as IdentityStep
from spanledger.chains.steps import ProviderStep as ProviderStep
from spanledger.chains.steps import RerankStep as RerankStep
from spanledger.chains.steps import StepRanking as StepRanking
from spanledger.chains.steps import as_step as as_step
from spanledger.chains.steps import step as step

__all__ = [
    "BM25Step",
    "CallableStep",
    "CrossEncoderStep",
    "Gate",
    "GateCheck",
    "IdentityStep",
    "ProviderStep",
    "RerankStep",
    "StepRanking",
    "as_step",
    "step",
]
