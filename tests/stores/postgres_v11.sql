--
-- PostgreSQL database dump
--

\restrict Psv5U7bfOk9COVugJgvG6o09K8aV6DLO31EW3mag5n4dCm0jUfWOBfp1ydoNU06

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: continuum_settings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.continuum_settings (
    continuum_id text NOT NULL,
    settings bytea NOT NULL,
    owner text DEFAULT 'default'::text NOT NULL
);


--
-- Name: continuums; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.continuums (
    id text NOT NULL,
    created_at double precision NOT NULL,
    history_start bigint DEFAULT 0 NOT NULL,
    message_count bigint DEFAULT 0 NOT NULL,
    last_turn_at double precision,
    last_message_id text,
    owner text DEFAULT 'default'::text NOT NULL
);


--
-- Name: documents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.documents (
    label text NOT NULL,
    content text NOT NULL,
    updated_at double precision NOT NULL,
    owner text DEFAULT 'default'::text NOT NULL
);


--
-- Name: forgotten_users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.forgotten_users (
    name_sha256 text NOT NULL,
    at double precision NOT NULL
);


--
-- Name: jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs (
    id bigint NOT NULL,
    owner text NOT NULL,
    kind text NOT NULL,
    continuum_id text NOT NULL,
    payload bytea NOT NULL,
    state text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_at double precision NOT NULL,
    claimed_at double precision,
    last_error text,
    created_at double precision NOT NULL,
    finished_at double precision,
    record bytea,
    lease_key bigint,
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'done'::text, 'failed'::text])))
);


--
-- Name: jobs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: jobs_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.jobs_id_seq OWNED BY public.jobs.id;


--
-- Name: memories; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.memories (
    id bigint NOT NULL,
    text text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision,
    importance double precision NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED,
    owner text DEFAULT 'default'::text NOT NULL,
    source_segment bigint,
    uses bigint DEFAULT 0 NOT NULL,
    embedding bytea,
    vector real[]
);


--
-- Name: memories_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.memories_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: memories_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.memories_id_seq OWNED BY public.memories.id;


--
-- Name: messages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.messages (
    id bigint NOT NULL,
    continuum_id text NOT NULL,
    seq bigint NOT NULL,
    turn_id text NOT NULL,
    role text NOT NULL,
    content bytea NOT NULL,
    text text NOT NULL,
    created_at double precision NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED,
    owner text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT messages_role_check CHECK ((role = ANY (ARRAY['user'::text, 'assistant'::text])))
);


--
-- Name: messages_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.messages_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: messages_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.messages_id_seq OWNED BY public.messages.id;


--
-- Name: model_facts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.model_facts (
    name text NOT NULL,
    facts bytea NOT NULL,
    fetched_at double precision NOT NULL
);


--
-- Name: reminders; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reminders (
    id bigint NOT NULL,
    text text NOT NULL,
    due_at double precision,
    created_at double precision NOT NULL,
    completed_at double precision,
    origin text NOT NULL,
    owner text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT reminders_origin_check CHECK ((origin = ANY (ARRAY['user'::text, 'agent'::text])))
);


--
-- Name: reminders_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.reminders_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: reminders_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.reminders_id_seq OWNED BY public.reminders.id;


--
-- Name: schema_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_version (
    version integer NOT NULL
);


--
-- Name: searches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.searches (
    id bigint NOT NULL,
    owner text NOT NULL,
    continuum_id text NOT NULL,
    query text NOT NULL,
    state text NOT NULL,
    requested_at double precision NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    claimed_at double precision,
    finished_at double precision,
    turns_left integer,
    passages bytea,
    error text,
    CONSTRAINT searches_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'done'::text])))
);


--
-- Name: searches_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.searches_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: searches_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.searches_id_seq OWNED BY public.searches.id;


--
-- Name: segments; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.segments (
    id bigint NOT NULL,
    continuum_id text NOT NULL,
    started_at double precision NOT NULL,
    ended_at double precision NOT NULL,
    turn_count bigint NOT NULL,
    title text NOT NULL,
    first_seq bigint NOT NULL,
    owner text DEFAULT 'default'::text NOT NULL,
    summary text DEFAULT ''::text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, ((title || ' '::text) || summary))) STORED
);


--
-- Name: segments_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.segments_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: segments_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.segments_id_seq OWNED BY public.segments.id;


--
-- Name: term_stats; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.term_stats (
    kind text NOT NULL,
    term text NOT NULL,
    docs bigint NOT NULL,
    CONSTRAINT term_stats_kind_check CHECK ((kind = ANY (ARRAY['message'::text, 'memory'::text])))
);


--
-- Name: turns; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.turns (
    ord bigint NOT NULL,
    id text NOT NULL,
    continuum_id text NOT NULL,
    status text NOT NULL,
    started_at double precision NOT NULL,
    record bytea NOT NULL,
    owner text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT turns_status_check CHECK ((status = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))
);


--
-- Name: turns_ord_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.turns_ord_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: turns_ord_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.turns_ord_seq OWNED BY public.turns.ord;


--
-- Name: users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.users (
    name text NOT NULL,
    token_hash text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: vector_model; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.vector_model (
    model text NOT NULL,
    dimensions integer NOT NULL
);


--
-- Name: jobs id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs ALTER COLUMN id SET DEFAULT nextval('public.jobs_id_seq'::regclass);


--
-- Name: memories id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memories ALTER COLUMN id SET DEFAULT nextval('public.memories_id_seq'::regclass);


--
-- Name: messages id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages ALTER COLUMN id SET DEFAULT nextval('public.messages_id_seq'::regclass);


--
-- Name: reminders id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reminders ALTER COLUMN id SET DEFAULT nextval('public.reminders_id_seq'::regclass);


--
-- Name: searches id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.searches ALTER COLUMN id SET DEFAULT nextval('public.searches_id_seq'::regclass);


--
-- Name: segments id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.segments ALTER COLUMN id SET DEFAULT nextval('public.segments_id_seq'::regclass);


--
-- Name: turns ord; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turns ALTER COLUMN ord SET DEFAULT nextval('public.turns_ord_seq'::regclass);


--
-- Data for Name: continuum_settings; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.continuum_settings (continuum_id, settings, owner) FROM stdin;
main	\\x7b226d61785f746f6b656e73223a323034387d	default
\.


--
-- Data for Name: continuums; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.continuums (id, created_at, history_start, message_count, last_turn_at, last_message_id, owner) FROM stdin;
main	1800000000	0	4	1800000000	msg_fab17054ed40918900dba150	default
\.


--
-- Data for Name: documents; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.documents (label, content, updated_at, owner) FROM stdin;
profile	Ada likes tea and quiet mornings.	1796191602.520137	default
\.


--
-- Data for Name: forgotten_users; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.forgotten_users (name_sha256, at) FROM stdin;
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.jobs (id, owner, kind, continuum_id, payload, state, attempts, next_at, claimed_at, last_error, created_at, finished_at, record, lease_key) FROM stdin;
\.


--
-- Data for Name: memories; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.memories (id, text, created_at, expires_at, importance, owner, source_segment, uses, embedding, vector) FROM stdin;
1	Ada's cat is called Turing	1796191602.5209134	\N	0.7	default	\N	1	\N	\N
\.


--
-- Data for Name: messages; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.messages (id, continuum_id, seq, turn_id, role, content, text, created_at, owner) FROM stdin;
1	main	0	turn_38cd73240efa4ca2853159d75b7a1c41	user	\\x5b7b2274797065223a2274657874222c2274657874223a2268656c6c6f2c204920616d20416461227d5d	hello, I am Ada	1800000000	default
2	main	1	turn_38cd73240efa4ca2853159d75b7a1c41	assistant	\\x5b7b2274797065223a2274657874222c2274657874223a22596f7520736169643a20e2809c68656c6c6f2c204920616d20416461e2809d2e20492063616e207365653a206461746574696d655f73656374696f6e2c206163746976655f72656d696e646572732c2072656c6576616e745f6d656d6f726965732e227d5d	You said: “hello, I am Ada”. I can see: datetime_section, active_reminders, relevant_memories.	1800000000	default
3	main	2	turn_7d6a5992e5ea4923a9221a0ec4d86590	user	\\x5b7b2274797065223a2274657874222c2274657874223a227768617420646f20796f752072656d656d6265722061626f7574206d653f227d5d	what do you remember about me?	1800000000	default
4	main	3	turn_7d6a5992e5ea4923a9221a0ec4d86590	assistant	\\x5b7b2274797065223a2274657874222c2274657874223a22596f7520736169643a20e2809c7768617420646f20796f752072656d656d6265722061626f7574206d653fe2809d2e20492063616e207365653a206461746574696d655f73656374696f6e2c20636f6e766572736174696f6e5f6d616e69666573742c206163746976655f72656d696e646572732e227d5d	You said: “what do you remember about me?”. I can see: datetime_section, conversation_manifest, active_reminders.	1800000000	default
\.


--
-- Data for Name: model_facts; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.model_facts (name, facts, fetched_at) FROM stdin;
\.


--
-- Data for Name: reminders; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.reminders (id, text, due_at, created_at, completed_at, origin, owner) FROM stdin;
1	water the plants	\N	1796191602.5212345	\N	user	default
\.


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.schema_version (version) FROM stdin;
11
\.


--
-- Data for Name: searches; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.searches (id, owner, continuum_id, query, state, requested_at, attempts, claimed_at, finished_at, turns_left, passages, error) FROM stdin;
\.


--
-- Data for Name: segments; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.segments (id, continuum_id, started_at, ended_at, turn_count, title, first_seq, owner, summary) FROM stdin;
1	main	1800000000	1800000000	2	hello, I am Ada	0	default	
\.


--
-- Data for Name: term_stats; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.term_stats (kind, term, docs) FROM stdin;
\.


--
-- Data for Name: turns; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.turns (ord, id, continuum_id, status, started_at, record, owner) FROM stdin;
1	turn_38cd73240efa4ca2853159d75b7a1c41	main	completed	1800000000	\\x7b227475726e5f6964223a227475726e5f3338636437333234306566613463613238353331353964373562376131633431222c22636f6e74696e75756d5f6964223a226d61696e222c22737461747573223a22636f6d706c65746564222c22737461727465645f6174223a313830303030303030302e302c2266696e69736865645f6174223a313830303030303030302e302c226d6f64656c223a22636c617564652d736f6e6e65742d342d36222c22757365725f74657874223a2268656c6c6f2c204920616d20416461222c227265706c795f74657874223a22596f7520736169643a20e2809c68656c6c6f2c204920616d20416461e2809d2e20492063616e207365653a206461746574696d655f73656374696f6e2c206163746976655f72656d696e646572732c2072656c6576616e745f6d656d6f726965732e222c227573616765223a7b22696e7075745f746f6b656e73223a3431372c2263616368655f6372656174696f6e5f696e7075745f746f6b656e73223a323032362c2263616368655f726561645f696e7075745f746f6b656e73223a302c226f75747075745f746f6b656e73223a33332c2263616368655f6372656174696f6e5f356d223a323032362c2263616368655f6372656174696f6e5f3168223a302c227765625f7365617263685f7265717565737473223a302c227765625f66657463685f7265717565737473223a307d2c2263616368655f6d6973735f726561736f6e223a6e756c6c2c22636f6d706f73655f6d73223a372e39393934373530303033363036392c2266697273745f746f6b656e5f6d73223a33332e38363036333230303031343137382c22746f74616c5f6d73223a33342e33393133343830303030393932342c226d6f64656c5f63616c6c73223a312c2263616c6c5f7573616765223a5b7b22696e7075745f746f6b656e73223a3431372c2263616368655f6372656174696f6e5f696e7075745f746f6b656e73223a323032362c2263616368655f726561645f696e7075745f746f6b656e73223a302c226f75747075745f746f6b656e73223a33332c2263616368655f6372656174696f6e5f356d223a323032362c2263616368655f6372656174696f6e5f3168223a302c227765625f7365617263685f7265717565737473223a302c227765625f66657463685f7265717565737473223a307d5d2c2273656374696f6e73223a5b7b226e616d65223a22626173655f70726f6d7074222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e32313534313239393937353036393730352c226167655f73223a6e756c6c2c22746f6b656e73223a3532357d2c7b226e616d65223a22646f6d61696e646f63222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a362e3138323633383939393233343736392c226167655f73223a6e756c6c2c22746f6b656e73223a32357d2c7b226e616d65223a22746f6f6c5f67756964616e6365222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e323539303838393939383832383036312c226167655f73223a6e756c6c2c22746f6b656e73223a3234377d2c7b226e616d65223a22746f6f6c5f68696e7473222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a322e3039363430353939393530393434332c226167655f73223a6e756c6c2c22746f6b656e73223a33337d2c7b226e616d65223a226461746574696d655f73656374696f6e222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a322e313933343831393939373131333636342c226167655f73223a6e756c6c2c22746f6b656e73223a31387d2c7b226e616d65223a22636f6e766572736174696f6e5f6d616e6966657374222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a22656d707479222c22656c61707365645f6d73223a362e3932343833313939393634303434362c226167655f73223a6e756c6c2c22746f6b656e73223a307d2c7b226e616d65223a226163746976655f72656d696e64657273222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a362e393133343634393939333432393737352c226167655f73223a6e756c6c2c22746f6b656e73223a397d2c7b226e616d65223a22636f6e746578745f7365617263685f726573756c7473222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a22656d707479222c22656c61707365645f6d73223a362e3139383138313939393933343630342c226167655f73223a6e756c6c2c22746f6b656e73223a307d2c7b226e616d65223a2272656c6576616e745f6d656d6f72696573222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a372e3233313937323939393736313633382c226167655f73223a6e756c6c2c22746f6b656e73223a31317d5d2c227761726e696e6773223a5b5d2c226572726f72223a6e756c6c2c226d6573736167655f6964223a226d73675f333762393935666632383862323133636663353264316430222c2273746f705f726561736f6e223a22656e645f7475726e222c2263616368655f74746c223a7b2273797374656d223a22356d222c22686973746f7279223a22356d222c22726561736f6e223a2261646170746976653a206e6f207061757365207365656e207965742c20746865207072696f7220616c6f6e653b20616c6c20746f2077726974653b20657870656374656420392c30353020626173652d707269636520746f6b656e73206f7665722074686520636f6d696e67207475726e732c203330382062656c6f7720746865206e6578742062657374227d7d	default
2	turn_7d6a5992e5ea4923a9221a0ec4d86590	main	completed	1800000000	\\x7b227475726e5f6964223a227475726e5f3764366135393932653565613439323361393232316130656334643836353930222c22636f6e74696e75756d5f6964223a226d61696e222c22737461747573223a22636f6d706c65746564222c22737461727465645f6174223a313830303030303030302e302c2266696e69736865645f6174223a313830303030303030302e302c226d6f64656c223a22636c617564652d736f6e6e65742d342d36222c22757365725f74657874223a227768617420646f20796f752072656d656d6265722061626f7574206d653f222c227265706c795f74657874223a22596f7520736169643a20e2809c7768617420646f20796f752072656d656d6265722061626f7574206d653fe2809d2e20492063616e207365653a206461746574696d655f73656374696f6e2c20636f6e766572736174696f6e5f6d616e69666573742c206163746976655f72656d696e646572732e222c227573616765223a7b22696e7075745f746f6b656e73223a3433362c2263616368655f6372656174696f6e5f696e7075745f746f6b656e73223a34332c2263616368655f726561645f696e7075745f746f6b656e73223a323032362c226f75747075745f746f6b656e73223a33372c2263616368655f6372656174696f6e5f356d223a302c2263616368655f6372656174696f6e5f3168223a34332c227765625f7365617263685f7265717565737473223a302c227765625f66657463685f7265717565737473223a307d2c2263616368655f6d6973735f726561736f6e223a6e756c6c2c22636f6d706f73655f6d73223a352e3034383633363939393136333133362c2266697273745f746f6b656e5f6d73223a35312e35353535383230303032313931352c22746f74616c5f6d73223a35322e31373833303730303037353836352c226d6f64656c5f63616c6c73223a312c2263616c6c5f7573616765223a5b7b22696e7075745f746f6b656e73223a3433362c2263616368655f6372656174696f6e5f696e7075745f746f6b656e73223a34332c2263616368655f726561645f696e7075745f746f6b656e73223a323032362c226f75747075745f746f6b656e73223a33372c2263616368655f6372656174696f6e5f356d223a302c2263616368655f6372656174696f6e5f3168223a34332c227765625f7365617263685f7265717565737473223a302c227765625f66657463685f7265717565737473223a307d5d2c2273656374696f6e73223a5b7b226e616d65223a22626173655f70726f6d7074222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e30383137353239393939303339383334342c226167655f73223a6e756c6c2c22746f6b656e73223a3532357d2c7b226e616d65223a22646f6d61696e646f63222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a322e363138323630303030343137363439332c226167655f73223a6e756c6c2c22746f6b656e73223a32357d2c7b226e616d65223a22746f6f6c5f67756964616e6365222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e31313835313739393939303833363239382c226167655f73223a6e756c6c2c22746f6b656e73223a3234377d2c7b226e616d65223a22746f6f6c5f68696e7473222c22706c6163656d656e74223a2273797374656d222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e31323139303330303030333536373234352c226167655f73223a6e756c6c2c22746f6b656e73223a33337d2c7b226e616d65223a226461746574696d655f73656374696f6e222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a302e31373330303030303033353930323438352c226167655f73223a6e756c6c2c22746f6b656e73223a31387d2c7b226e616d65223a22636f6e766572736174696f6e5f6d616e6966657374222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a322e383939323231303030303036393436332c226167655f73223a6e756c6c2c22746f6b656e73223a31347d2c7b226e616d65223a226163746976655f72656d696e64657273222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a226672657368222c22656c61707365645f6d73223a322e363539393132303030313236343936342c226167655f73223a6e756c6c2c22746f6b656e73223a397d2c7b226e616d65223a22636f6e746578745f7365617263685f726573756c7473222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a22656d707479222c22656c61707365645f6d73223a322e363330303037303030333334343434352c226167655f73223a6e756c6c2c22746f6b656e73223a307d2c7b226e616d65223a2272656c6576616e745f6d656d6f72696573222c22706c6163656d656e74223a226e6f74696669636174696f6e222c22737461747573223a22656d707479222c22656c61707365645f6d73223a342e3739343336343939393732353037362c226167655f73223a6e756c6c2c22746f6b656e73223a307d5d2c227761726e696e6773223a5b5d2c226572726f72223a6e756c6c2c226d6573736167655f6964223a226d73675f666162313730353465643430393138393030646261313530222c2273746f705f726561736f6e223a22656e645f7475726e222c2263616368655f74746c223a7b2273797374656d223a223168222c22686973746f7279223a223168222c22726561736f6e223a2261646170746976653a206f662031207061757365732c2030206265747765656e203520616e64203630206d696e20616e642030206f76657220616e20686f75723b20616c69766520746f2077726974653b20657870656374656420342c32373220626173652d707269636520746f6b656e73206f7665722074686520636f6d696e67207475726e732c203231322062656c6f7720746865206e6578742062657374227d7d	default
\.


--
-- Data for Name: users; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.users (name, token_hash, created_at) FROM stdin;
\.


--
-- Data for Name: vector_model; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.vector_model (model, dimensions) FROM stdin;
\.


--
-- Name: jobs_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.jobs_id_seq', 1, false);


--
-- Name: memories_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.memories_id_seq', 1, false);


--
-- Name: messages_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.messages_id_seq', 1, false);


--
-- Name: reminders_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.reminders_id_seq', 1, false);


--
-- Name: searches_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.searches_id_seq', 1, false);


--
-- Name: segments_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.segments_id_seq', 1, false);


--
-- Name: turns_ord_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.turns_ord_seq', 2, true);


--
-- Name: continuum_settings continuum_settings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.continuum_settings
    ADD CONSTRAINT continuum_settings_pkey PRIMARY KEY (owner, continuum_id);


--
-- Name: continuums continuums_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.continuums
    ADD CONSTRAINT continuums_pkey PRIMARY KEY (owner, id);


--
-- Name: documents documents_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.documents
    ADD CONSTRAINT documents_pkey PRIMARY KEY (owner, label);


--
-- Name: forgotten_users forgotten_users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.forgotten_users
    ADD CONSTRAINT forgotten_users_pkey PRIMARY KEY (name_sha256);


--
-- Name: jobs jobs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);


--
-- Name: memories memories_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memories
    ADD CONSTRAINT memories_pkey PRIMARY KEY (id);


--
-- Name: messages messages_owner_continuum_id_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_owner_continuum_id_seq_key UNIQUE (owner, continuum_id, seq);


--
-- Name: messages messages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (id);


--
-- Name: model_facts model_facts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.model_facts
    ADD CONSTRAINT model_facts_pkey PRIMARY KEY (name);


--
-- Name: reminders reminders_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reminders
    ADD CONSTRAINT reminders_pkey PRIMARY KEY (id);


--
-- Name: searches searches_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.searches
    ADD CONSTRAINT searches_pkey PRIMARY KEY (id);


--
-- Name: segments segments_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.segments
    ADD CONSTRAINT segments_pkey PRIMARY KEY (id);


--
-- Name: term_stats term_stats_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.term_stats
    ADD CONSTRAINT term_stats_pkey PRIMARY KEY (kind, term);


--
-- Name: turns turns_ord_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT turns_ord_key UNIQUE (ord);


--
-- Name: turns turns_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT turns_pkey PRIMARY KEY (id);


--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (name);


--
-- Name: users users_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_token_hash_key UNIQUE (token_hash);


--
-- Name: jobs_by_continuum; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_by_continuum ON public.jobs USING btree (owner, continuum_id, id);


--
-- Name: jobs_by_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_by_owner ON public.jobs USING btree (owner, id);


--
-- Name: jobs_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_due ON public.jobs USING btree (state, next_at);


--
-- Name: memories_by_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX memories_by_owner ON public.memories USING btree (owner, id);


--
-- Name: memories_fts; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX memories_fts ON public.memories USING gin (tsv) WITH (fastupdate=off);


--
-- Name: memories_waiting_for_vector; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX memories_waiting_for_vector ON public.memories USING btree (id) WHERE (embedding IS NULL);


--
-- Name: messages_fts; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX messages_fts ON public.messages USING gin (tsv) WITH (gin_pending_list_limit='64');


--
-- Name: reminders_active; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reminders_active ON public.reminders USING btree (owner, due_at) WHERE (completed_at IS NULL);


--
-- Name: searches_by_continuum; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX searches_by_continuum ON public.searches USING btree (owner, continuum_id, id);


--
-- Name: searches_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX searches_open ON public.searches USING btree (id) WHERE (state <> 'done'::text);


--
-- Name: segments_by_continuum; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX segments_by_continuum ON public.segments USING btree (owner, continuum_id, ended_at);


--
-- Name: segments_fts; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX segments_fts ON public.segments USING gin (tsv) WITH (gin_pending_list_limit='64');


--
-- Name: turns_by_continuum; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX turns_by_continuum ON public.turns USING btree (owner, continuum_id, started_at);


--
-- Name: turns_by_start; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX turns_by_start ON public.turns USING btree (started_at);


--
-- Name: messages messages_owner_continuum_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_owner_continuum_id_fkey FOREIGN KEY (owner, continuum_id) REFERENCES public.continuums(owner, id);


--
-- Name: messages messages_turn_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turns(id);


--
-- Name: segments segments_owner_continuum_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.segments
    ADD CONSTRAINT segments_owner_continuum_id_fkey FOREIGN KEY (owner, continuum_id) REFERENCES public.continuums(owner, id);


--
-- Name: turns turns_owner_continuum_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT turns_owner_continuum_id_fkey FOREIGN KEY (owner, continuum_id) REFERENCES public.continuums(owner, id);


--
-- PostgreSQL database dump complete
--

\unrestrict Psv5U7bfOk9COVugJgvG6o09K8aV6DLO31EW3mag5n4dCm0jUfWOBfp1ydoNU06

