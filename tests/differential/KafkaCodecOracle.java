// KafkaCodecOracle: Kafka's own Java serializers as the reference for kproxy's codec.
//
// Run as a single-file program against the Kafka 4.4.0 jars:
//
//   java -cp '.cache/kafka-4.4.0/libs/*' tests/differential/KafkaCodecOracle.java \
//        --seed S --count N --pairs-out PAIRS --generate-out LINES \
//        [--reencode-in IN --reencode-out OUT]
//
// --pairs-out     every (direction, api key, version) kafka-clients defines, one per line:
//                 "request 3 12 MetadataRequest unstable|stable"
// --generate-out  N random messages per pair, in kproxy-codec's input format:
//                 "request|response <api_key> <version> <hex of header + body>"
//                 The bytes are canonical: random bytes are written by walking the version's
//                 Schema (org.apache.kafka.common.protocol.types), then read with the generated
//                 *Data class and written again by it. They include unknown tagged fields.
// --raw-out       for the random messages whose raw bytes Kafka re-encodes differently (a tagged
//                 field equal to its default, which Kafka omits): "<line> <Kafka's hex>".
// --mutants-out   3 damaged copies (cut short, a byte changed, a byte inserted) of each random
//                 message with Kafka's verdict: "<line>\t<Kafka's hex or error <reason>>".
// --json-out      for each line of --generate-out, Kafka's JSON of the body (the generated
//                 *DataJsonConverter, records as their size), to check kproxy's field decoding.
// --reencode-in   lines in the same format (e.g. made by kproxy's own random instances);
// --reencode-out  for each, Kafka's re-encoding after reading it: "<hex>" or "error <reason>".
//
// Everything runs in one JVM so a whole differential run pays the JVM start-up once.
// Messages Kafka itself cannot read back (should not happen) are reported on stderr as
// "oracle-skip ..." and counted in the summary line.

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.NullableSchema;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

public class KafkaCodecOracle {

  // ---------------------------------------------------------------------------------------------
  // Byte sink with Kafka's primitive encodings
  // ---------------------------------------------------------------------------------------------
  static final class Out {
    final ByteArrayOutputStream b = new ByteArrayOutputStream();
    void i8(int v) { b.write(v & 0xff); }
    void i16(int v) { i8(v >> 8); i8(v); }
    void i32(int v) { i16(v >> 16); i16(v); }
    void i64(long v) { i32((int) (v >>> 32)); i32((int) v); }
    void uvarint(int v) {
      while ((v & 0xffffff80) != 0) { i8((v & 0x7f) | 0x80); v >>>= 7; }
      i8(v);
    }
    void varint(int v) { uvarint((v << 1) ^ (v >> 31)); }
    void varlong(long v) {
      long u = (v << 1) ^ (v >> 63);
      while ((u & 0xffffffffffffff80L) != 0) { i8((int) ((u & 0x7f) | 0x80)); u >>>= 7; }
      i8((int) u);
    }
    void raw(byte[] a) { b.write(a, 0, a.length); }
    byte[] bytes() { return b.toByteArray(); }
  }

  // ---------------------------------------------------------------------------------------------
  // Random messages by walking Kafka's Schema objects
  // ---------------------------------------------------------------------------------------------
  static final class RandomWriter {
    final Random rnd;
    /** Every tag number any version of the current message knows (never used as "unknown"). */
    Set<Integer> knownTags = new TreeSet<>();
    int depth = 0;

    RandomWriter(Random rnd) { this.rnd = rnd; }

    boolean chance(double p) { return rnd.nextDouble() < p; }

    int int32() {
      switch (rnd.nextInt(6)) {
        case 0: return 0;
        case 1: return -1;
        case 2: return rnd.nextBoolean() ? Integer.MAX_VALUE : Integer.MIN_VALUE;
        case 3: return rnd.nextInt(100);
        default: return rnd.nextInt();
      }
    }
    long int64() {
      switch (rnd.nextInt(6)) {
        case 0: return 0;
        case 1: return -1;
        case 2: return rnd.nextBoolean() ? Long.MAX_VALUE : Long.MIN_VALUE;
        case 3: return rnd.nextInt(1000);
        default: return rnd.nextLong();
      }
    }
    int int16() {
      switch (rnd.nextInt(5)) {
        case 0: return 0;
        case 1: return -1;
        case 2: return rnd.nextInt(120);
        default: return (short) rnd.nextInt();
      }
    }
    static final String[] SAMPLES = {"", "a", "topic-1", "orders.v2", "caf\u00e9", "\u65e5\u672c", "x_y-Z.9", "__consumer_offsets"};
    byte[] string() {
      String s;
      if (chance(0.5)) {
        s = SAMPLES[rnd.nextInt(SAMPLES.length)];
      } else {
        StringBuilder sb = new StringBuilder();
        int n = rnd.nextInt(12);
        for (int i = 0; i < n; i++) sb.append((char) ('!' + rnd.nextInt(94)));
        s = sb.toString();
      }
      if (chance(0.3)) s = s + "-" + Integer.toHexString(rnd.nextInt());  // keeps map keys distinct
      if (chance(0.03)) s = s + "x".repeat(120 + rnd.nextInt(200));       // a 2-byte compact length
      return s.getBytes(StandardCharsets.UTF_8);
    }
    byte[] blob(int max) {
      byte[] a = new byte[chance(0.03) ? 128 + rnd.nextInt(400) : rnd.nextInt(max + 1)];
      rnd.nextBytes(a);
      return a;
    }
    int arrayCount(Type elem) {
      if (!(elem instanceof Schema) && chance(0.04)) return 128 + rnd.nextInt(40);  // 2-byte compact count
      if (depth > 4) return rnd.nextInt(2);
      return chance(0.2) ? 0 : 1 + rnd.nextInt(3);
    }

    /** Writes the "zero" value of `t`: what most tagged fields default to (0, false, null if
     *  nullable, else empty), so Kafka's writer omits it and kproxy must too. */
    void writeZero(Out o, Type t) {
      if (t == Type.BOOLEAN || t == Type.INT8) { o.i8(0); return; }
      if (t == Type.INT16 || t == Type.UINT16) { o.i16(0); return; }
      if (t == Type.INT32 || t == Type.UNSIGNED_INT32) { o.i32(0); return; }
      if (t == Type.INT64 || t == Type.FLOAT64) { o.i64(0); return; }
      if (t == Type.UUID) { o.raw(new byte[16]); return; }
      if (t == Type.VARINT || t == Type.VARLONG) { o.i8(0); return; }
      if (t == Type.STRING || t == Type.NULLABLE_STRING) { o.i16(t.isNullable() ? -1 : 0); return; }
      if (t == Type.BYTES || t == Type.NULLABLE_BYTES || t == Type.RECORDS || t == Type.NULLABLE_RECORDS) { o.i32(t.isNullable() ? -1 : 0); return; }
      if (t instanceof ArrayOf) { o.i32(t.isNullable() ? -1 : 0); return; }
      if (t == Type.COMPACT_STRING || t == Type.COMPACT_BYTES || t == Type.COMPACT_RECORDS
          || t == Type.COMPACT_NULLABLE_STRING || t == Type.COMPACT_NULLABLE_BYTES || t == Type.COMPACT_NULLABLE_RECORDS
          || t instanceof CompactArrayOf) {
        o.uvarint(t.isNullable() ? 0 : 1);
        return;
      }
      if (t instanceof NullableSchema) { o.i8(-1); return; }
      if (t instanceof Schema) { for (BoundField f : ((Schema) t).fields()) writeZero(o, f.def.type); return; }
      if (t instanceof TaggedFields) { o.uvarint(0); return; }
      throw new IllegalStateException("unhandled schema type " + t);
    }

    void write(Out o, Type t) {
      if (t == Type.BOOLEAN) { o.i8(rnd.nextBoolean() ? 1 : 0); return; }
      if (t == Type.INT8) { o.i8(rnd.nextInt(256)); return; }
      if (t == Type.INT16) { o.i16(int16()); return; }
      if (t == Type.UINT16) { o.i16(chance(0.3) ? 0xffff : rnd.nextInt(65536)); return; }
      if (t == Type.INT32) { o.i32(int32()); return; }
      if (t == Type.UNSIGNED_INT32) { o.i32(int32()); return; }
      if (t == Type.INT64) { o.i64(int64()); return; }
      if (t == Type.FLOAT64) {
        double[] specials = {0.0, -0.0, 1.5, -2.25, Double.MAX_VALUE, Double.MIN_VALUE, Double.POSITIVE_INFINITY};
        double d = chance(0.4) ? specials[rnd.nextInt(specials.length)] : rnd.nextDouble() * 1e6 - 5e5;
        o.i64(Double.doubleToRawLongBits(d));
        return;
      }
      if (t == Type.UUID) { byte[] u = new byte[16]; if (!chance(0.2)) rnd.nextBytes(u); o.raw(u); return; }
      if (t == Type.VARINT) { o.varint(int32()); return; }
      if (t == Type.VARLONG) { o.varlong(int64()); return; }
      if (t == Type.STRING || t == Type.NULLABLE_STRING) {
        if (t.isNullable() && chance(0.2)) { o.i16(-1); return; }
        byte[] s = string(); o.i16(s.length); o.raw(s); return;
      }
      if (t == Type.COMPACT_STRING || t == Type.COMPACT_NULLABLE_STRING) {
        if (t.isNullable() && chance(0.2)) { o.uvarint(0); return; }
        byte[] s = string(); o.uvarint(s.length + 1); o.raw(s); return;
      }
      if (t == Type.BYTES || t == Type.NULLABLE_BYTES || t == Type.RECORDS || t == Type.NULLABLE_RECORDS) {
        if (t.isNullable() && chance(0.2)) { o.i32(-1); return; }
        byte[] a = blob(t == Type.RECORDS || t == Type.NULLABLE_RECORDS ? 80 : 12); o.i32(a.length); o.raw(a); return;
      }
      if (t == Type.COMPACT_BYTES || t == Type.COMPACT_NULLABLE_BYTES || t == Type.COMPACT_RECORDS || t == Type.COMPACT_NULLABLE_RECORDS) {
        if (t.isNullable() && chance(0.2)) { o.uvarint(0); return; }
        byte[] a = blob(t == Type.COMPACT_RECORDS || t == Type.COMPACT_NULLABLE_RECORDS ? 80 : 12); o.uvarint(a.length + 1); o.raw(a); return;
      }
      if (t instanceof ArrayOf || t instanceof CompactArrayOf) {
        boolean compact = t instanceof CompactArrayOf;
        if (t.isNullable() && chance(0.2)) { if (compact) o.uvarint(0); else o.i32(-1); return; }
        Type elem = t.arrayElementType().orElseThrow();
        int n = arrayCount(elem);
        if (compact) o.uvarint(n + 1); else o.i32(n);
        depth++;
        for (int i = 0; i < n; i++) write(o, elem);
        depth--;
        return;
      }
      if (t instanceof NullableSchema) {
        if (chance(0.25)) { o.i8(-1); return; }
        o.i8(1);
        writeStruct(o, (Schema) t);
        return;
      }
      if (t instanceof Schema) { writeStruct(o, (Schema) t); return; }
      if (t instanceof TaggedFields) { writeTagged(o, (TaggedFields) t); return; }
      throw new IllegalStateException("unhandled schema type " + t + " (" + t.getClass().getName() + ")");
    }

    void writeStruct(Out o, Schema s) {
      depth++;
      for (BoundField f : s.fields()) write(o, f.def.type);
      depth--;
    }

    void writeTagged(Out o, TaggedFields t) {
      TreeMap<Integer, byte[]> chosen = new TreeMap<>();
      for (Map.Entry<Integer, Field> e : t.fields().entrySet()) {
        if (!chance(0.6)) continue;
        Out payload = new Out();
        depth++;
        if (chance(0.25)) writeZero(payload, e.getValue().type);
        else write(payload, e.getValue().type);
        depth--;
        chosen.put(e.getKey(), payload.bytes());
      }
      int unknown = chance(0.5) ? rnd.nextInt(3) : 0;
      for (int i = 0; i < unknown; i++) {
        int tag;
        switch (rnd.nextInt(3)) {
          case 0: tag = rnd.nextInt(12); break;
          case 1: tag = 100 + rnd.nextInt(200); break;
          default: tag = 20000 + rnd.nextInt(1 << 20); break;
        }
        if (knownTags.contains(tag) || t.fields().containsKey(tag)) continue;
        chosen.put(tag, blob(9));
      }
      o.uvarint(chosen.size());
      for (Map.Entry<Integer, byte[]> e : chosen.entrySet()) {
        o.uvarint(e.getKey());
        o.uvarint(e.getValue().length);
        o.raw(e.getValue());
      }
    }
  }

  /** Collects every tag number in every TaggedFields reachable from the schemas. */
  static void collectTags(Type t, Set<Integer> into, Set<Type> seen) {
    if (t == null || !seen.add(t)) return;
    if (t instanceof TaggedFields) {
      for (Map.Entry<Integer, Field> e : ((TaggedFields) t).fields().entrySet()) {
        into.add(e.getKey());
        collectTags(e.getValue().type, into, seen);
      }
    } else if (t instanceof Schema) {
      for (BoundField f : ((Schema) t).fields()) collectTags(f.def.type, into, seen);
    } else if (t.isArray()) {
      collectTags(t.arrayElementType().orElse(null), into, seen);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reading and re-writing a frame (header + body) with Kafka's generated classes
  // ---------------------------------------------------------------------------------------------
  static byte[] serialize(Message header, short headerVersion, Message body, short version) {
    ObjectSerializationCache cache = new ObjectSerializationCache();
    int hs = header.size(cache, headerVersion);
    int bs = body.size(cache, version);
    ByteBuffer buf = ByteBuffer.allocate(hs + bs);
    ByteBufferAccessor acc = new ByteBufferAccessor(buf);
    header.write(acc, cache, headerVersion);
    body.write(acc, cache, version);
    if (buf.hasRemaining()) throw new IllegalStateException("size() said " + (hs + bs) + " but write left " + buf.remaining());
    return buf.array();
  }

  /** Kafka's JSON of a body (the generated *DataJsonConverter, records as their size). */
  static String bodyJson(boolean request, short key, short version, byte[] frame) {
    ApiMessage[] body = new ApiMessage[1];
    reencode(request, key, version, frame, body);
    try {
      Class<?> conv = Class.forName(body[0].getClass().getName() + "JsonConverter");
      Object node = conv.getMethod("write", body[0].getClass(), short.class, boolean.class).invoke(null, body[0], version, false);
      return node.toString();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("no JSON converter for " + body[0].getClass().getName() + ": " + e);
    }
  }

  /** Reads a whole frame (after the size prefix) and returns Kafka's re-encoding of it. */
  static byte[] reencode(boolean request, short key, short version, byte[] frame) {
    return reencode(request, key, version, frame, null);
  }

  static byte[] reencode(boolean request, short key, short version, byte[] frame, ApiMessage[] bodyOut) {
    ApiMessageType type = ApiMessageType.fromApiKey(key);
    ByteBuffer buf = ByteBuffer.wrap(frame);
    ByteBufferAccessor acc = new ByteBufferAccessor(buf);
    Message header;
    short hv;
    ApiMessage body;
    if (request) {
      hv = type.requestHeaderVersion(version);
      RequestHeaderData h = new RequestHeaderData(acc, hv);
      if (h.requestApiKey() != key || h.requestApiVersion() != version)
        throw new IllegalArgumentException("header says api " + h.requestApiKey() + " v" + h.requestApiVersion());
      header = h;
      body = type.newRequest();
    } else {
      hv = type.responseHeaderVersion(version);
      header = new ResponseHeaderData(acc, hv);
      body = type.newResponse();
    }
    int bodyStart = buf.position();
    try {
      body.read(acc, version);
      if (buf.hasRemaining()) throw new IllegalArgumentException(buf.remaining() + " bytes left after the body");
    } catch (RuntimeException e) {
      // As ApiVersionsResponse.parse: a broker that does not support the requested version
      // answers in v0 format, so a response that fails at its version is read again as v0.
      if (request || key != ApiMessageType.API_VERSIONS.apiKey() || version == 0) throw e;
      buf.position(bodyStart);
      body = type.newResponse();
      body.read(acc, (short) 0);
      if (buf.hasRemaining()) throw e;
      version = 0;
    }
    if (bodyOut != null) bodyOut[0] = body;
    return serialize(header, hv, body, version);
  }

  static byte[] randomFrame(RandomWriter rw, ApiMessageType type, boolean request, short version) {
    Out o = new Out();
    Schema schema = (request ? type.requestSchemas() : type.responseSchemas())[version];
    if (request) {
      short hv = type.requestHeaderVersion(version);
      o.i16(type.apiKey());
      o.i16(version);
      o.i32(rw.int32());
      if (hv >= 1) {
        if (rw.chance(0.15)) o.i16(-1);
        else { byte[] s = rw.string(); o.i16(s.length); o.raw(s); }
      }
      if (hv >= 2) rw.writeTagged(o, new TaggedFields(new HashMap<>()));
    } else {
      short hv = type.responseHeaderVersion(version);
      o.i32(rw.int32());
      if (hv >= 1) rw.writeTagged(o, new TaggedFields(new HashMap<>()));
    }
    rw.writeStruct(o, schema);
    return o.bytes();
  }

  /** A damaged copy of a frame: cut short, one byte changed, or one byte inserted. */
  static byte[] mutate(Random rnd, byte[] frame) {
    int at = rnd.nextInt(frame.length + 1);
    switch (rnd.nextInt(3)) {
      case 0:
        return Arrays.copyOf(frame, Math.max(0, Math.min(at, frame.length - 1)));
      case 1: {
        byte[] m = frame.clone();
        if (m.length > 0) m[Math.min(at, m.length - 1)] ^= (byte) (1 + rnd.nextInt(255));
        return m;
      }
      default: {
        byte[] m = new byte[frame.length + 1];
        System.arraycopy(frame, 0, m, 0, at);
        m[at] = (byte) rnd.nextInt(256);
        System.arraycopy(frame, at, m, at + 1, frame.length - at);
        return m;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Driver
  // ---------------------------------------------------------------------------------------------
  static final char[] HEX = "0123456789abcdef".toCharArray();
  static String hex(byte[] a) {
    char[] c = new char[a.length * 2];
    for (int i = 0; i < a.length; i++) { c[2 * i] = HEX[(a[i] >> 4) & 15]; c[2 * i + 1] = HEX[a[i] & 15]; }
    return new String(c);
  }
  static byte[] unhex(String s) {
    if (s.length() % 2 != 0) throw new IllegalArgumentException("odd hex length");
    byte[] a = new byte[s.length() / 2];
    for (int i = 0; i < a.length; i++) a[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return a;
  }

  static String oneLine(Throwable e) {
    String m = e.getClass().getSimpleName() + ": " + e.getMessage();
    return m.replace('\n', ' ').replace('\r', ' ');
  }

  public static void main(String[] args) throws IOException {
    try {
      run(args);
    } catch (Throwable e) {
      // The single-file launcher mangles stack traces of exceptions escaping main.
      e.printStackTrace();
      System.exit(1);
    }
  }

  static void run(String[] args) throws IOException {
    Map<String, String> opt = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) opt.put(args[i], args[i + 1]);
    if (args.length % 2 != 0 || opt.isEmpty()) {
      System.err.println("usage: KafkaCodecOracle --seed S --count N --pairs-out F --generate-out F [--raw-out F] [--mutants-out F] [--json-out F] [--reencode-in F --reencode-out F]");
      System.exit(2);
    }
    long seed = Long.parseLong(opt.getOrDefault("--seed", "1"));
    int count = Integer.parseInt(opt.getOrDefault("--count", "5"));

    if (opt.containsKey("--pairs-out") || opt.containsKey("--generate-out")) {
      int pairs = 0, lines = 0, skips = 0;
      BufferedWriter pw = opt.containsKey("--pairs-out") ? Files.newBufferedWriter(Path.of(opt.get("--pairs-out"))) : null;
      BufferedWriter gw = opt.containsKey("--generate-out") ? Files.newBufferedWriter(Path.of(opt.get("--generate-out"))) : null;
      BufferedWriter jw = opt.containsKey("--json-out") ? Files.newBufferedWriter(Path.of(opt.get("--json-out"))) : null;
      BufferedWriter mw = opt.containsKey("--mutants-out") ? Files.newBufferedWriter(Path.of(opt.get("--mutants-out"))) : null;
      BufferedWriter rw_ = opt.containsKey("--raw-out") ? Files.newBufferedWriter(Path.of(opt.get("--raw-out"))) : null;
      for (ApiMessageType type : ApiMessageType.values()) {
        try {
          type.newRequest();
          type.newResponse();
        } catch (RuntimeException e) {
          // Keys 4-7 (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) stay in the
          // enum but define no versions any more (removed in Kafka 4.0).
          System.out.println("oracle: api key " + type.apiKey() + " (" + type.name + ") defines no versions: " + oneLine(e));
          continue;
        }
        for (boolean request : new boolean[] {true, false}) {
          Message proto = request ? type.newRequest() : type.newResponse();
          short lo = proto.lowestSupportedVersion(), hi = proto.highestSupportedVersion();
          short stableHi = type.highestSupportedVersion(false);
          Schema[] schemas = request ? type.requestSchemas() : type.responseSchemas();
          Set<Integer> tags = new TreeSet<>();
          for (Schema s : schemas) collectTags(s, tags, new java.util.HashSet<>());
          String dir = request ? "request" : "response";
          for (short v = lo; v <= hi; v++) {
            pairs++;
            if (pw != null) pw.write(dir + " " + type.apiKey() + " " + v + " " + proto.getClass().getSimpleName().replace("Data", "")
                + " " + (v > stableHi ? "unstable" : "stable") + "\n");
            if (gw == null) continue;
            // One Random per pair, derived from the run's seed: a pair reproduces alone.
            Random rnd = new Random(seed * 1_000_003L + type.apiKey() * 1009L + v * 17L + (request ? 0 : 7));
            RandomWriter rw = new RandomWriter(rnd);
            Random mutationRnd = new Random(~rnd.nextLong());  // mutants do not shift the messages
            rw.knownTags = tags;
            int made = 0, attempts = 0;
            while (made < count && attempts < count * 4) {
              attempts++;
              byte[] raw = randomFrame(rw, type, request, v);
              try {
                byte[] canon = reencode(request, type.apiKey(), v, raw);
                byte[] again = reencode(request, type.apiKey(), v, canon);
                if (!Arrays.equals(canon, again)) throw new IllegalStateException("Kafka's own re-encoding is not stable");
                gw.write(dir + " " + type.apiKey() + " " + v + " " + hex(canon) + "\n");
                if (rw_ != null && !Arrays.equals(raw, canon))
                  rw_.write(dir + " " + type.apiKey() + " " + v + " " + hex(raw) + " " + hex(canon) + "\n");
                made++;
                lines++;
                if (jw != null) jw.write(bodyJson(request, type.apiKey(), v, canon) + "\n");
                if (mw != null) {
                  for (int m = 0; m < 3; m++) {
                    byte[] mutant = mutate(mutationRnd, canon);
                    String result;
                    try {
                      result = hex(reencode(request, type.apiKey(), v, mutant));
                    } catch (RuntimeException e) {
                      result = "error " + oneLine(e);
                    }
                    mw.write(dir + " " + type.apiKey() + " " + v + " " + hex(mutant) + "\t" + result + "\n");
                  }
                }
              } catch (RuntimeException e) {
                skips++;
                System.err.println("oracle-skip " + dir + " " + type.apiKey() + " " + v + ": " + oneLine(e));
              }
            }
          }
        }
      }
      if (pw != null) pw.close();
      if (gw != null) gw.close();
      if (rw_ != null) rw_.close();
      if (mw != null) mw.close();
      if (jw != null) jw.close();
      System.out.println("oracle: seed " + seed + ", " + pairs + " pairs defined, " + lines + " messages written, " + skips + " random frames Kafka refused");
    }

    if (opt.containsKey("--reencode-in")) {
      int ok = 0, bad = 0;
      try (BufferedReader in = Files.newBufferedReader(Path.of(opt.get("--reencode-in")));
           BufferedWriter out = Files.newBufferedWriter(Path.of(opt.get("--reencode-out")))) {
        String line;
        while ((line = in.readLine()) != null) {
          String[] p = line.trim().split("\\s+");
          if (p.length == 0 || p[0].isEmpty()) { out.write("error empty line\n"); bad++; continue; }
          try {
            if (p.length != 4) throw new IllegalArgumentException("expected 4 words");
            byte[] b = reencode(p[0].equals("request"), Short.parseShort(p[1]), Short.parseShort(p[2]), unhex(p[3]));
            out.write(hex(b) + "\n");
            ok++;
          } catch (RuntimeException e) {
            out.write("error " + oneLine(e) + "\n");
            bad++;
          }
        }
      }
      System.out.println("oracle: re-encoded " + ok + " lines, " + bad + " refused");
    }
  }
}
