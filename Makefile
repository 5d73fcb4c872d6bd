# cdc_apply — PGXS build (C++17).  `make && make install && make installcheck`.
EXTVERSION = 0.2.0
MODULE_big = cdc_apply
MODULEDIR = extension

CORE_SRCS = src/core/json.cpp src/core/envelope.cpp src/core/version.cpp src/core/decode.cpp src/core/decision.cpp \
            src/core/copy_text.cpp src/core/modes.cpp src/core/layout.cpp src/core/batch_plan.cpp \
            src/core/audit_sql.cpp src/core/audit_diff.cpp src/core/stats_math.cpp src/core/offset_claims.cpp \
            src/core/buffer_pool.cpp src/core/location_cache.cpp
PG_SRCS = src/pg/module.cpp src/pg/guc.cpp src/pg/guard.cpp src/pg/spi.cpp src/pg/sql_api.cpp src/pg/mapping_write.cpp src/pg/jsonb_view.cpp \
          src/pg/apply/engine.cpp src/pg/apply/target.cpp src/pg/apply/image.cpp src/pg/apply/single.cpp \
          src/pg/apply/segment.cpp src/pg/apply/outbox.cpp src/pg/apply/table_write.cpp src/pg/apply/state_store.cpp src/pg/apply/state_direct.cpp src/pg/apply/modes.cpp \
          src/pg/apply/horizon.cpp src/pg/apply/counters.cpp src/pg/apply/id_cache.cpp \
          src/pg/worker/launcher.cpp src/pg/worker/apply_worker.cpp src/pg/worker/source_conn.cpp \
          src/pg/worker/pgoutput.cpp src/pg/worker/transactions.cpp src/pg/worker/progress.cpp \
          src/pg/worker/stream_spool.cpp src/pg/worker/table_copy.cpp src/pg/worker/status.cpp \
          src/pg/worker/lifecycle.cpp src/pg/worker/continuity.cpp src/pg/worker/slot_at_commit.cpp src/pg/worker/registry.cpp \
          src/pg/audit/source.cpp src/pg/audit/session.cpp src/pg/audit/tables.cpp src/pg/audit/common.cpp \
          src/pg/audit/audit.cpp src/pg/audit/resync.cpp \
          src/pg/shared_stats.cpp
OBJS = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# The release script 0.1.0 stays installable; the update script from it is
# built from sql/cdc_apply--0.1.0--0.2.0.sql.in with the 0.2.0 script
# inserted (scripts/build_update_script.sh), so the two always create the
# same objects (docs/sql-reference.md, "Upgrading").
DATA = control/cdc_apply.control sql/cdc_apply--$(EXTVERSION).sql sql/cdc_apply--0.1.0.sql
DATA_built = sql/cdc_apply--0.1.0--0.2.0.sql

# pg_regress suites (sql/*.sql -> expected/*.out); run against a server that
# has the extension installed (make installcheck).
REGRESS = setup basics envelope decoding semantics scenarios bad_input privileges fixtures history handlers outbox outbox_message retention subscriptions batch batch_offsets metadata_cache drop_target security target_features rekey subscription_control stream_ordering audit counters direct_writes direct_state_writes truncate_groups insert_skipping_taken key_text_settings key_text_equal_values content_hash_stable context_clip_encoding batch_memory rekey_collation outbox_taken_decoded nested_error_context json_error_encoding key_case_accents batch_memory_long nested_error_context_deep text_form_encoding nested_error_context_depth17 insert_first_records insert_first_stream_mark key_index_collation key_text_equal_types key_text_char_array domain_null rekey_owner_code outbox_message_forged schema_error_field json_nul_outbox sql_ascii_forms rekey_owner_read history_partitioned rekey_memory outbox_message_grants update_before_key_null two_phase fold_session_user dangling_target_state skip_transaction_args history_source_ts_range outbox_topic_delegate entities_barrier delegation_lock jsonb_intake timestamp_strict_form timestamp_strict_diff unlogged_target handler_execute target_rules delivery_key_limit event_cache_bound generated_key error_clip_elements subscription_names key_columns_dims delivery_key_empty partition_tree_mapping quoted_table_names envelope_positions partition_apply_tree drop_owned_guard long_source_names integer_field_range jsonb_number_datums nested_ddl_direct stream_marks_barrier array_nulls_setting decimal_empty_bytes subscription_args key_columns_args envelope_wrapper_shape array_element_detail outbox_payload_settings resync_key_values field_schema_members null_arguments mapping_grant_handler regclass_missing_args input_polish outbox_stored_payload outbox_stored_payload_fuzz row_location_cache row_location_hot_chain row_location_cache_reentry admin_args readme_examples skip_after_drop batch_text_json_errors speculative_reentry row_location_cache_setting update_suppressed commit_search_path new_user_s31 handler_drop_guard ledger_drop_target new_user_s32
REGRESS_OPTS = --inputdir=.

ISOLATION = concurrent_claim concurrent_versions prune_concurrent metadata_cache_sessions security_prune_lock security_lock_queue outbox_concurrent direct_writes_concurrent batch_target_concurrent batch_state_concurrent batch_offsets_concurrent insert_skipping_taken direct_upsert_foreign_insert direct_rows_retry direct_upsert_taken_deadlock direct_upsert_taken_outbox insert_first_concurrent prepared_counters_concurrent prepared_delivery_replay security_outbox_source_lock security_mapping_lock partition_tree_lock row_location_concurrent row_location_truncate
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation/output

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -Isrc -I$(libpq_srcdir) -DCDC_EXTVERSION=\"$(EXTVERSION)\"
PG_CXXFLAGS = -std=c++17 -Wno-register -fvisibility=hidden
SHLIB_LINK_INTERNAL = $(libpq)
# -lcrypto: md5 through OpenSSL's EVP interface where PostgreSQL uses
# OpenSSL (src/pg/spi.cpp, Md5Binary)
SHLIB_LINK = -lstdc++ $(filter -lcrypto,$(LIBS))
# PGXS would also build LLVM bitcode with clang++ for JIT inlining; the
# engine's hot path is not expression evaluation, so skip it.
override with_llvm = no

EXTRA_CLEAN = test/isolation/output build

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Regression inputs read ../shared when it is there (fixture and scenario
# files); tests that need it print a notice otherwise.
.PHONY: unittest
unittest:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build --target cdc_unit_tests -j2
	./build/cdc_unit_tests

sql/cdc_apply--0.1.0--0.2.0.sql: sql/cdc_apply--0.1.0--0.2.0.sql.in sql/cdc_apply--0.2.0.sql scripts/build_update_script.sh
	sh scripts/build_update_script.sh $< sql/cdc_apply--0.2.0.sql > $@.tmp && mv $@.tmp $@

# Rebuild objects when any header changes (PGXS tracks no C++ header deps).
$(OBJS): $(wildcard src/core/*.hpp src/pg/*.hpp src/pg/*/*.hpp)
