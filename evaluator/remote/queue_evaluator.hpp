#pragma once
// Evaluations through the store's work queue (store/work_queue.hpp,
// docs/cluster.md). The coordinator (`korch run`, `korch serve`) with
// evaluator.remote = true gets a QueueEvaluator: evaluate() enqueues the
// request and a waiter thread delivers the result once a `korch worker`
// wrote it. Episodes and LLM calls stay in the coordinator; workers compile
// and measure. The engine's own rules (one result per request id, looked up
// in the store before evaluate()) are untouched: a coordinator that resumes
// enqueues the same request ids again, and a row already done delivers its
// stored result.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config/campaign.hpp"
#include "evaluator/evaluator.hpp"
#include "util/error.hpp"

namespace korch::evaluator::remote {

// The version a queued evaluation needs from its worker: the evaluator's
// mode and version and every setting a verdict rests on, readable, e.g.
// "cpu 1.4 tolerance=strict torch_ops=allow timeout_s=300 memory_budget_mb=4096".
// `version` is the evaluator's version() (queue_version_for computes it
// without starting one). `device_model` (in gpu mode the name the GPU
// reports, "NVIDIA H100 80GB HBM3"; korch worker reads it off its evaluator's
// device description) ends it as " device=<model>" when not empty: timings of
// an H100 and an A100 are not one campaign's, so their workers never share a
// queue. A remote gpu campaign takes the model of the first worker that
// registered and pins it (store::CampaignDevice).
std::string queue_version(const config::EvaluatorConfig& cfg, std::string_view version,
                          std::string_view device_model = {});
std::string queue_version_for(const config::EvaluatorConfig& cfg);

// The device model a queue version names ("" when none): the inverse of
// queue_version's `device_model` for a version of `base` (queue_version_for).
std::optional<std::string> device_model_of(std::string_view version, std::string_view base);

// The request as the queue row's request_json carries it, and back.
std::string encode_request(const evaluator::Request& request);
Result<evaluator::Request> decode_request(std::string_view json);

// Seconds the coordinator waits between sweeps for results when no NOTIFY
// arrives (a NOTIFY lost to a reconnect is caught up by the next sweep).
inline constexpr double k_result_sweep_s = 1.0;

// The coordinator's evaluator: enqueues into the store at `store_url` (a
// postgres:// URL) under `campaign_id` ("" for korch serve). Fails when the
// store is not PostgreSQL or cannot be reached. Reached through
// evaluator::make_evaluator (factory.cpp) when cfg.remote.
Result<std::unique_ptr<evaluator::Evaluator>> make_queue_evaluator(
    const config::EvaluatorConfig& cfg, const std::string& store_url,
    const std::string& campaign_id);

}  // namespace korch::evaluator::remote
